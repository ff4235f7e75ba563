import jax.numpy as jnp
import numpy as np

import autoflow


@autoflow.jit
def positives(xs):
    return [x for x in xs if x > 0]  # expect: AF108


@autoflow.jit
def positive_sum(xs):
    return sum([x for x in xs if x > 0])  # a masked sum: fine


@autoflow.jit
def evens(n):
    return [k for k in range(10) if k % 2 == 0]  # static: fine


@autoflow.jit
def head(x, n):
    return x[:n].sum()  # expect: AF109 n


@autoflow.jit
def window(x, i):
    return x[i] + x[:3].sum()  # an index, and a static slice: fine


@autoflow.jit
def prefix_sums(x):
    t = 0.0
    for i in range(1, 4):  # expect: AF107 i
        t = t + jnp.sum(x[:i])  # a static index: unrolled (AF107), not AF109
    return t


def helper(x):
    return x.max().item()  # expect: AF110


def to_numpy(x):
    return np.asarray(x) * 2  # expect: AF110


def fill(x):
    buf = np.zeros(3)
    for i in range(3):
        buf[i] = x * i  # expect: AF111 buf
    return buf


def fill_jax(x):
    buf = jnp.zeros(3)
    for i in range(3):
        buf = buf.at[i].set(x * i)  # fine
    return buf


@autoflow.jit
def calls(x):
    return helper(x) + to_numpy(x).sum() + fill(x).sum() + fill_jax(x).sum()
