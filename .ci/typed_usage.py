"""User code against autoflow's public API, for `mypy --strict` (run by .ci/wheel_smoke.sh
on the installed wheel, so that what is checked is what py.typed ships)."""

from collections.abc import Callable
from typing import assert_type

import jax
import jax.numpy as jnp

import autoflow


def collatz_steps(n: jax.Array) -> jax.Array:
    steps: jax.Array = jnp.zeros((), jnp.int32)
    while n != 1:
        n = jnp.where(n % 2 == 0, n // 2, 3 * n + 1)
        steps = steps + 1
    return steps


converted: Callable[[jax.Array], jax.Array] = autoflow.convert(collatz_steps)
assert_type(autoflow.convert(collatz_steps)(jnp.int32(3)), jax.Array)  # the same signature back


@autoflow.convert(strict=True, max_loop_iterations=100)
def clip(x: float) -> float:
    return x if x > 0 else 0.0


assert_type(clip(1.0), float)

jitted = autoflow.jit(collatz_steps, donate_argnums=())
assert_type(jitted, jax.stages.Wrapped)
lowered: jax.stages.Lowered = jitted.lower(jnp.int32(27))


@autoflow.jit(static_argnames=["n"])
def power(x: jax.Array, n: int) -> jax.Array:
    for _ in autoflow.unroll(range(n)):
        x = x * x
    for i in autoflow.roll(range(3), unroll=2):
        x = x + i
    return x


@autoflow.do_not_convert
def python_only(x: int) -> int:
    return x + 1


assert_type(python_only(1), int)
source: str = autoflow.to_source(collatz_steps)
print(autoflow.explain(collatz_steps, "i32"))
autoflow.trace_print("shape", (3,))
with autoflow.install_import_hook("mypkg", directories=["src"], strict=True) as hook:
    pass
hook.uninstall()
errors: tuple[type[Exception], ...] = (autoflow.ConversionError, autoflow.AutoflowError,
                                       autoflow.TracingError, autoflow.LoopLimitError)
warnings_: tuple[type[Warning], ...] = (autoflow.ConversionWarning, autoflow.PerformanceWarning)
