"""Greedy decoding from a tiny fixed random recurrent "language model".

At each step the model maps the previous token and the hidden state to logits;
the argmax token is written to the next slot of the output and decoding stops
early with ``break`` when the end token is produced. ``max_len`` is a static
argument, so the output is a fixed-size buffer of ``max_len`` tokens (padded
with the end token) plus the number of tokens actually generated.

Plain ``jax.jit(greedy_decode, static_argnames="max_len")`` fails at
``if tok == END_TOKEN:`` with ``jax.errors.TracerBoolConversionError``.
``autoflow.jit`` turns the ``for`` loop with ``break`` into a
``lax.while_loop`` that stops at the end token.

The eager-Python habit of ``tokens.append(tok)`` followed by
``jnp.stack(tokens)`` cannot be compiled here: the length of the list would
depend on when the end token appears, and an XLA program has fixed output
shapes. The compiled version therefore writes into a preallocated buffer with
``tokens.at[step].set(tok)``; the NumPy reference below appends to a list.
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

VOCAB, HIDDEN, END_TOKEN = 16, 8, 0


def init_params(seed=18):
    rng = np.random.default_rng(seed)
    return {
        "emb": rng.normal(size=(VOCAB, HIDDEN)).astype(np.float32),
        "U": (rng.normal(size=(HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32),
        "W": rng.normal(size=(HIDDEN, VOCAB)).astype(np.float32),
    }


def greedy_decode(params, start_token, max_len=20):
    h = jnp.zeros(params["U"].shape[0])
    tok = start_token
    tokens = jnp.full(max_len, END_TOKEN)
    length = max_len
    for step in range(max_len):
        h = jnp.tanh(params["emb"][tok] + h @ params["U"])
        logits = h @ params["W"]
        tok = jnp.argmax(logits)
        tokens = tokens.at[step].set(tok)
        if tok == END_TOKEN:
            length = step + 1
            break
    return tokens, length


greedy_decode_jit = autoflow.jit(greedy_decode, static_argnames="max_len")


def greedy_decode_reference(params, start_token, max_len=20):
    h = np.zeros(HIDDEN)
    tok = start_token
    tokens = []
    for step in range(max_len):
        h = np.tanh(params["emb"][tok] + h @ params["U"])
        tok = int(np.argmax(h @ params["W"]))
        tokens.append(tok)
        if tok == END_TOKEN:
            break
    return np.array(tokens)


def bench(fn, *args, repeats=20, **kwargs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times)


def main():
    params = init_params()
    jparams = jax.tree.map(jnp.asarray, params)
    for k, start in enumerate([2, 4, 5]):
        (tokens, length), first, median = bench(greedy_decode_jit, jparams, jnp.int32(start), max_len=20)
        out = np.asarray(tokens)[: int(length)]
        ref = greedy_decode_reference(params, start, max_len=20)
        print(f"start={start}: autoflow  {out.tolist()} ({int(length)} tokens)")
        print(f"         reference {ref.tolist()} ({len(ref)} tokens)")
        note = "trace + compile" if k == 0 else "already compiled"
        print(f"    first call {first * 1e3:.1f} ms ({note}), median later call {median * 1e6:.1f} us")
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.asarray(tokens)[int(length):], END_TOKEN)
    print("OK")


if __name__ == "__main__":
    main()
