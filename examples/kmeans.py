"""k-means (Lloyd's algorithm) iterated while the cluster assignments change.

200 2-D points from three Gaussian blobs, k = 3. The loop
``while changed and it < max_iter`` stops once no point switches cluster, so
the number of iterations depends on the data.

Plain ``jax.jit(kmeans)`` fails at ``while changed and it < max_iter:`` with
``jax.errors.TracerBoolConversionError`` (``changed`` is a traced boolean).
``autoflow.jit`` emits a ``lax.while_loop``.
"""

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
    assign = assign_points(points, centroids)
    changed = True
    it = 0
    while changed and it < max_iter:
        onehot = jax.nn.one_hot(assign, k)
        counts = onehot.sum(0)
        sums = onehot.T @ points
        centroids = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], centroids)
        new_assign = assign_points(points, centroids)
        changed = jnp.any(new_assign != assign)
        assign = new_assign
        it += 1
    return centroids, assign, it


kmeans_jit = autoflow.jit(kmeans)


def kmeans_reference(points, centroids, max_iter=100):
    points = np.asarray(points, np.float64)
    centroids = np.asarray(centroids, np.float64).copy()
    assign = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)
    for it in range(1, max_iter + 1):
        for j in range(len(centroids)):
            if (assign == j).any():
                centroids[j] = points[assign == j].mean(0)
        new_assign = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)
        changed = (new_assign != assign).any()
        assign = new_assign
        if not changed:
            break
    return centroids, assign, it


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [3.0, 1.0], [1.0, 4.0]])
    points = np.concatenate([c + rng.normal(scale=0.8, size=(70, 2)) for c in centers])[:200]
    rng.shuffle(points)
    init = points[:3].copy()
    return points.astype(np.float32), init.astype(np.float32)


def bench(fn, *args, repeats=20):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times)


def main():
    points, init = make_data()
    (centroids, assign, iters), first, median = bench(kmeans_jit, jnp.asarray(points), jnp.asarray(init))
    c_ref, a_ref, iters_ref = kmeans_reference(points, init)
    print(f"autoflow ({int(iters)} iterations):\n{np.asarray(centroids)}")
    print(f"reference ({iters_ref} iterations):\n{c_ref}")
    print(f"first call {first * 1e3:.1f} ms, median later call {median * 1e6:.1f} us")
    np.testing.assert_allclose(np.asarray(centroids), c_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(assign), a_ref)
    np.testing.assert_allclose(int(iters), iters_ref)
    print("OK")


if __name__ == "__main__":
    main()
