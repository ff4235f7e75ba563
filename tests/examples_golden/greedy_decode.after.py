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
    broke = False

    def loop_body(step, h, tok, tokens, length, broke):
        h = jnp.tanh(params["emb"][tok] + h @ params["U"])
        logits = h @ params["W"]
        tok = jnp.argmax(logits)
        tokens = tokens.at[step].set(tok)

        def if_true(length, broke):
            length = step + 1
            broke = True
            return (length, broke)

        def if_false(length, broke):
            return (length, broke)
        length, broke = af.if_stmt(tok == END_TOKEN, if_true, if_false, (length, broke), ("length", "broke"))
        return (h, tok, tokens, length, broke)

    def loop_test(h, tok, tokens, length, broke):
        return af.not_(broke)
    h, tok, tokens, length, broke = af.for_stmt(af.range(max_len), loop_body, (h, tok, tokens, length, broke), ("h", "tok", "tokens", "length", "broke"), test=loop_test)
    return tokens, length


greedy_decode_jit = autoflow.jit(greedy_decode, static_argnames="max_len")


def greedy_decode_reference(params, start_token, max_len=20):
    h = np.zeros(HIDDEN)
    tok = start_token
    tokens = []
    broke = False

    def loop_body(step, h, tok, tokens, broke):
        h = np.tanh(params["emb"][tok] + h @ params["U"])
        tok = af.int(np.argmax(h @ params["W"]))
        tokens = af.append(tokens, tok)
        broke = af.bool(tok == END_TOKEN)
        return (h, tok, tokens, broke)

    def loop_test(h, tok, tokens, broke):
        return af.not_(broke)
    h, tok, tokens, broke = af.for_stmt(af.range(max_len), loop_body, (h, tok, tokens, broke), ("h", "tok", "tokens", "broke"), test=loop_test)
    return np.array(tokens)


def bench(fn, *args, repeats=20, **kwargs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(af.call(fn, *args, **kwargs))
    first = time.perf_counter() - t0
    times = []

    def loop_body(_, times):
        t0 = time.perf_counter()
        jax.block_until_ready(af.call(fn, *args, **kwargs))
        times = af.append(times, time.perf_counter() - t0)
        return times
    times = af.for_stmt(af.range(repeats), loop_body, (times,), ("times",))
    return out, first, statistics.median(times)


def main():
    params = af.call(init_params)
    jparams = jax.tree.map(jnp.asarray, af.converted(params))

    def loop_body(itr):
        k, start = itr
        (tokens, length), first, median = af.call(bench, greedy_decode_jit, jparams, jnp.int32(start), max_len=20)
        out = np.asarray(tokens)[:af.int(length)]
        ref = af.call(greedy_decode_reference, params, start, max_len=20)
        af.print(af.fstring("start={0}: autoflow  {1} ({2} tokens)", start, out.tolist(), af.int(length)))
        af.print(af.fstring("         reference {0} ({1} tokens)", ref.tolist(), af.len(ref)))
        note = af.if_exp(k == 0, lambda: "trace + compile", lambda: "already compiled")
        af.print(af.fstring("    first call {0:.1f} ms ({1}), median later call {2:.1f} us", first * 1e3, note, median * 1e6))
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.asarray(tokens)[af.int(length):], END_TOKEN)
    af.for_stmt(af.enumerate([2, 4, 5]), loop_body, (), ())
    af.print("OK")


if __name__ == "__main__":
    main()
