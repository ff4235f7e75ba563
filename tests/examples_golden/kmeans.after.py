"""k-means (Lloyd's algorithm) iterated while the cluster assignments change.

200 2-D points from three Gaussian blobs, k = 3. The loop
``while changed and it < max_iter`` stops once no point switches cluster, so
the number of iterations depends on the data.

Plain ``jax.jit(kmeans)`` fails at ``while changed and it < max_iter:`` with
``jax.errors.TracerBoolConversionError`` (``changed`` is a traced boolean).
``autoflow.jit`` emits a ``lax.while_loop``.
"""

import autoflow.runtime as af

import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

try:
    import autoflow
except ImportError:  # running from a source checkout without installing autoflow
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import autoflow


def assign_points(points, centroids):
    d2 = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(-1)
    return jnp.argmin(d2, axis=1)


def kmeans(points, centroids, max_iter=100):
    k = centroids.shape[0]
    assign = af.call(assign_points, points, centroids)
    changed = True
    it = 0

    def loop_test(centroids, changed, assign, it):
        return af.and_(changed, lambda: it < max_iter)

    def loop_body(centroids, changed, assign, it):
        onehot = jax.nn.one_hot(assign, k)
        counts = onehot.sum(0)
        sums = onehot.T @ points
        centroids = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], centroids)
        new_assign = af.call(assign_points, points, centroids)
        changed = jnp.any(new_assign != assign)
        assign = new_assign
        it += 1
        return (centroids, changed, assign, it)
    centroids, changed, assign, it = af.while_stmt(loop_test, loop_body, (centroids, changed, assign, it), ("centroids", "changed", "assign", "it"))
    return centroids, assign, it


kmeans_jit = autoflow.jit(kmeans)


def kmeans_reference(points, centroids, max_iter=100):
    points = np.asarray(points, np.float64)
    centroids = np.asarray(centroids, np.float64).copy()
    assign = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)
    broke = False
    it = af.Undefined("it")

    def loop_body(itr, it, centroids, assign, broke):
        it = itr

        def loop_body(j, centroids):

            def if_true(centroids):
                centroids = af.setitem(centroids, j, points[assign == j].mean(0))
                return centroids

            def if_false(centroids):
                return centroids
            centroids = af.if_stmt((assign == j).any(), if_true, if_false, (centroids,), ("centroids",))
            return centroids
        centroids = af.for_stmt(af.range(af.len(centroids)), loop_body, (centroids,), ("centroids",))
        new_assign = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)
        changed = (new_assign != assign).any()
        assign = new_assign
        broke = af.bool(af.not_(changed))
        return (it, centroids, assign, broke)

    def loop_test(it, centroids, assign, broke):
        return af.not_(broke)
    it, centroids, assign, broke = af.for_stmt(af.range(1, max_iter + 1), loop_body, (it, centroids, assign, broke), ("it", "centroids", "assign", "broke"), test=loop_test)
    return centroids, assign, af.ld(it)


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [3.0, 1.0], [1.0, 4.0]])
    points = np.concatenate([c + rng.normal(scale=0.8, size=(70, 2)) for c in centers])[:200]
    rng.shuffle(points)
    init = points[:3].copy()
    return points.astype(np.float32), init.astype(np.float32)


def bench(fn, *args, repeats=20):
    t0 = time.perf_counter()
    out = jax.block_until_ready(af.call(fn, *args))
    first = time.perf_counter() - t0
    times = []

    def loop_body(_, times):
        t0 = time.perf_counter()
        jax.block_until_ready(af.call(fn, *args))
        times = af.append(times, time.perf_counter() - t0)
        return times
    times = af.for_stmt(af.range(repeats), loop_body, (times,), ("times",))
    return out, first, statistics.median(times)


def main():
    points, init = af.call(make_data)
    (centroids, assign, iters), first, median = af.call(bench, kmeans_jit, jnp.asarray(points), jnp.asarray(init))
    c_ref, a_ref, iters_ref = af.call(kmeans_reference, points, init)
    af.print(af.fstring("autoflow ({0} iterations):\n{1}", af.int(iters), np.asarray(centroids)))
    af.print(af.fstring("reference ({0} iterations):\n{1}", iters_ref, c_ref))
    af.print(af.fstring("first call {0:.1f} ms, median later call {1:.1f} us", first * 1e3, median * 1e6))
    np.testing.assert_allclose(np.asarray(centroids), c_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(assign), a_ref)
    np.testing.assert_allclose(af.int(iters), iters_ref)
    af.print("OK")


if __name__ == "__main__":
    main()
