"""autoflow across processes: ``jax.distributed`` with a batch sharded over them.

``python examples/distributed.py`` starts two processes on this machine (each its own
JAX process with one CPU device, talking through ``jax.distributed``'s coordinator and
the gloo collectives), as a cluster launcher would start one per host. Each process
holds its half of the batch; ``jax.make_array_from_process_local_data`` makes one global
array sharded over both, and the converted function, a ``while`` loop with an ``if``
inside, runs under ``autoflow.jit`` on that array: one compiled program, every process
running its shard. The results are gathered and checked against plain Python.

``python examples/distributed.py --worker ID COUNT PORT`` is one process of it.
"""

import autoflow.runtime as af

import os
import socket
import subprocess
import sys
import time


def collatz_steps(n):
    steps = 0

    def loop_test(n, steps):
        return n != 1

    def loop_body(n, steps):

        def if_true(n):
            n = n // 2
            return n

        def if_false(n):
            n = 3 * n + 1
            return n
        n = af.if_stmt(n % 2 == 0, if_true, if_false, (n,), ("n",))
        steps += 1
        return (n, steps)
    n, steps = af.while_stmt(loop_test, loop_body, (n, steps), ("n", "steps"))
    return steps


def worker(process_id, count, port):
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    try:
        import autoflow
    except af.internal_errors:
        raise
    except ImportError:  # a source checkout without autoflow installed
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import autoflow

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=af.fstring("127.0.0.1:{0}", port), num_processes=count, process_id=process_id)
    af.assert_(af.and_(jax.process_count() == count, lambda: af.len(jax.devices()) == count), None)
    per_process = 500
    # Auto axes (what `Mesh` gives): on JAX 0.10, `jax.make_mesh`'s default Explicit
    # axes make `vmap` of any while loop fail ("Resource axis: batch ... not found"),
    # a hand-written `lax.while_loop` as much as a converted one.
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
    sharding = af.call(NamedSharding, mesh, af.call(PartitionSpec, "batch"))
    start = 1 + process_id * per_process
    local = np.arange(start, start + per_process, dtype=np.int32)  # this process's half
    ns = jax.make_array_from_process_local_data(sharding, local)

    batch_steps = autoflow.jit(jax.vmap(autoflow.convert(collatz_steps)))
    t0 = time.perf_counter()
    steps = jax.block_until_ready(af.call(batch_steps, ns))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(af.call(batch_steps, ns))
    later = time.perf_counter() - t0
    af.assert_(steps.sharding.is_equivalent_to(sharding, ns.ndim), None)
    everything = np.asarray(multihost_utils.process_allgather(steps, tiled=True))
    expected = np.array([af.call(collatz_steps, af.int(n)) for n in af.range(1, 1 + count * per_process)])
    np.testing.assert_array_equal(everything, expected)
    af.print(af.fstring("process {0}: {1} of {2} values, max {3} steps at n={4}, the same as the Python reference; first call {5:.1f} ms, later call {6:.0f} us", process_id, af.len(local), af.len(everything), everything.max(), everything.argmax() + 1, first * 1e3, later * 1e6), flush=True)
    jax.distributed.shutdown()


def main(count=2):
    with socket.socket() as s:  # a free port for the coordinator
        af.call(s.bind, ("127.0.0.1", 0))
        port = af.call(s.getsockname)[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", af.str(i), af.str(count), af.str(port)], env=env) for i in af.range(count)]
    codes = [af.call(p.wait, timeout=240) for p in procs]

    def if_true():
        raise af.exception(lambda: SystemExit(af.fstring("worker exit codes: {0}", codes)))

    def if_false():
        pass
    af.if_stmt(af.any(codes), if_true, if_false, (), ())
    af.print("OK")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(*map(int, sys.argv[2:5]))
    else:
        main()
