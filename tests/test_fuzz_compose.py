"""The composing fuzzer (``tests/fuzz_compose.py``): random programs, each lane under
``vmap``, ``jit(vmap)``, ``vmap(jit)``, nested ``vmap``, ``in_axes`` mixing batched and
unbatched arguments, ``grad``/``jvp`` compositions, against the eager run of that lane.

Each program runs in a worker process, killed if it does not finish in time (a hang
is a failure, not a stuck test run). Profiles (environment variables):

* ``AUTOFLOW_COMPOSE_EXAMPLES``: programs in the short run (default 24, 48 with
  ``AUTOFLOW_LONG=1``; one
  composition each, in turn; in the slow tier too, for the fast tier's time budget:
  ``SLOW`` in ``tests/conftest.py``);
* ``AUTOFLOW_COMPOSE_SLOW_EXAMPLES``: programs in the slow tier's run (default 30,
  three compositions each; 300 with ``AUTOFLOW_LONG=1``, the long checks);
* ``AUTOFLOW_COMPOSE_SEED``: the first seed (default 0).

A failure prints each distinct error once with its program, and how to rerun it
(``python -m tests.fuzz_compose SEED --composition KIND``). The long run (10,000
programs) is ``python -m tests.fuzz_compose 0 --scan 10000 --per-program 1
--workers 2``; its last result is in ``benchmarks/COMPOSE_FUZZ.md``.
"""

from __future__ import annotations

import os

import pytest

from . import fuzz_compose

FIRST = int(os.environ.get("AUTOFLOW_COMPOSE_SEED", "0"))
LONG = os.environ.get("AUTOFLOW_LONG", "") not in ("", "0")  # (tests/conftest.py: SAMPLED)
FAST = int(os.environ.get("AUTOFLOW_COMPOSE_EXAMPLES", "48" if LONG else "24"))
SLOW = int(os.environ.get("AUTOFLOW_COMPOSE_SLOW_EXAMPLES", "300" if LONG else "30"))
MAX_REFUSALS = 0.15  # (after issue 44's definedness: 1 refusal in a 400-program scan)


def _verdict(outcomes):
    bad = [o for o in outcomes if o.kind in ("difference", "internal", "hang", "generator")]
    refused = [o for o in outcomes if o.kind == "refused"]
    print(fuzz_compose.summary(outcomes))
    if bad:
        shown, seen = [], set()
        for o in bad:
            if o.signature() not in seen:
                seen.add(o.signature())
                shown.append(o.report())
        pytest.fail(fuzz_compose.summary(outcomes) + "\n\n" + "\n\n".join(shown[:6]),
                    pytrace=False)
    assert len(refused) <= MAX_REFUSALS * len(outcomes), fuzz_compose.summary(outcomes)
    assert len(outcomes) > 0


def test_every_lane_is_eager_python_under_each_composition():
    _verdict(fuzz_compose.run(fuzz_compose.plan(FIRST, FAST, 1)))


@pytest.mark.slow
def test_every_lane_is_eager_python_under_each_composition_long():
    _verdict(fuzz_compose.run(fuzz_compose.plan(FIRST + 1000, SLOW, 3), workers=2))


def test_the_generator_writes_what_compositions_break():
    sources = [fuzz_compose.generate(seed) for seed in range(40)]
    for piece in ("raise ValueError", "while m", "print(", "if q"):
        assert any(piece in s for s in sources), piece
    assert fuzz_compose.generate(7) == fuzz_compose.generate(7)


def test_a_program_that_takes_too_long_is_stopped_and_counted_a_hang():
    """A run longer than the time limit is killed, counted a hang and said where it was
    (the clock starts after the worker has loaded JAX and autoflow: on a slow machine
    the imports alone can take longer than a second). This program under ``vmap`` of
    ``grad`` runs for seconds (eagerly: many small compiles)."""
    slow, = fuzz_compose.run([(12561, "vmap_grad")], timeout=0.5)
    assert slow.kind == "hang", slow
    assert "no result within" in slow.detail and "(stopped while " in slow.detail, slow.detail
    assert "importlib" not in slow.detail, slow.detail


_STUCK = {
    # tracing a program that never ends being traced
    "tracing or compiling": """
def body(x):
    while True:
        x = jnp.sin(x)
jax.make_jaxpr(body)(1.0)
""",
    # a compiled loop that never ends
    "running the compiled program": """
jax.jit(lambda x: jax.lax.while_loop(lambda c: c > -1, lambda c: c + 1, x))(0).block_until_ready()
""",
}


@pytest.mark.parametrize("where", sorted(_STUCK))
def test_where_a_stopped_worker_was(tmp_path, where):
    """What a worker stopped for time was doing, read from its Python stack: tracing or
    compiling (a slow compile) or running compiled code (a loop that does not end). Two
    processes stuck for certain in each, set up as the fuzzer's workers are."""
    import subprocess
    import sys
    import time

    code = ("import faulthandler, os, signal, sys\n"
            "faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1] + f'/stack_{os.getpid()}.txt', 'w'))\n"
            "import jax, jax.numpy as jnp\n"
            "print('ready', flush=True)\n" + _STUCK[where])
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        detail = fuzz_compose._stopped_in(proc, str(tmp_path))
    finally:
        proc.kill()
        proc.wait()
    assert detail.startswith(f" (stopped while {where}: "), detail
