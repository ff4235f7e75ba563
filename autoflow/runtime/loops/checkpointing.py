"""Reverse mode through a loop with no bound on its trip count: online checkpointing.

``jax.grad`` of ``while cond(x): x = body(x)`` needs the carries of every
iteration, backwards, and the trip count is not known in advance. With a
budget of ``checkpoints`` carries:

* the forward pass (``forward``) runs the loop and saves the carry every
  ``stride`` steps in at most ``checkpoints // 2`` slots (when they are full,
  every other save is dropped and the stride doubles);
* the backward pass (``backward``) reverses the steps from the last to the
  first: a short gap above the nearest save is recomputed into a sweep buffer
  and reversed; a long one is cut into parts, saving their ends in free slots
  (``_split``). Its rounds (``next_round``, ``after_round``) are also those of
  ``loops.stored``'s backward pass beyond its stored steps, which sweeps into rows
  of residuals instead of carries.

Memory grows with ``checkpoints``, not with the trip count ``N``; each step is
recomputed about once more per level of cutting (1,000 steps: 3.5 evaluations
of the body per step in all, forward pass included; 10,000: 4; 100,000: 5,
with the default 64). Both passes are loops of ``loops.while_primitive`` themselves
(passed in as ``loop``), so ``jax.grad`` of ``jax.grad`` works.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .. import jax as jx
from ..common import counting
from ..common.primitives import inexact


def _slots(carry, k):
    return tuple(jnp.zeros((k,) + jnp.shape(x), jnp.result_type(x)) for x in carry)


def _write(buf, slot, x):
    return tuple(lax.dynamic_update_index_in_dim(b, v, slot, 0) for b, v in zip(buf, x))


def _layout(checkpoints):
    """How a budget of ``checkpoints`` carries is spent: ``(slots, forward, sweep)``:
    ``slots`` saved carries (at most ``forward`` of them by the forward pass, the
    rest by the backward pass's splits), a sweep buffer of ``sweep`` carries and
    one scratch slot: ``slots + sweep + 1 == checkpoints`` (from 8 on)."""
    sweep = min(64, max(2, checkpoints // 3))
    slots = max(2, checkpoints - sweep - 1)
    forward = max(2, min(slots, checkpoints // 2) // 2 * 2)
    return slots, forward, sweep


def save(x, n, buf, pos, count, stride, checkpoints):
    """One step of the forward pass's schedule (``forward``): the carry ``x`` before
    step ``n`` written into a free slot of ``buf`` where ``n`` is a multiple of
    ``stride`` (into the scratch slot otherwise), the saves thinned and ``stride``
    doubled when the slots are full. Returns ``(buf, pos, count, stride)``."""
    size, half, _ = _layout(checkpoints)
    due = n % stride == 0
    thin = due & (count == half)
    pos = jnp.where(thin & (pos >= 0) & ((pos // stride) % 2 == 1), -1, pos)
    count = jnp.where(thin, half // 2, count)
    stride = jnp.where(thin, stride * 2, stride)
    # (a reduction: it runs every step; counting.first costs more a step, and
    # saves a reduction's fixed cost only where the loop runs no step)
    free = jnp.argmax(pos[:size] < 0).astype(jnp.int32)
    slot = jnp.where(due, free, size)
    buf = _write(buf, slot, x)
    pos = pos.at[slot].set(jnp.where(due, n, -1))
    return buf, pos, count + due, stride


def unsaved(carry, checkpoints):
    """What ``forward`` returns for a loop that runs no step: ``(slots, pos, 0)``."""
    size, _, _ = _layout(checkpoints)
    return _slots(carry, size + 1), jnp.full((size + 1,), -1, jnp.int32), jnp.int32(0)


def forward(cond, body, cc, bc, carry, checkpoints, loop, go=None):
    """Run the loop, saving the carry before step ``n`` whenever ``n`` is a
    multiple of ``stride``, in at most ``checkpoints // 2`` slots: when they are
    full, the saves at odd multiples of ``stride`` are dropped and ``stride``
    doubles (``save``). Saved carries never move: ``pos[i]`` is the step whose carry
    slot ``i`` holds (-1: free); the last slot is scratch, written when nothing is
    saved, so that every step writes unconditionally (in place).
    With ``go`` (the test of ``carry``, already evaluated), the test of each step's
    result is evaluated at the end of the step, and ``go`` is carried: the test runs
    once per carry in all. Returns ``(final carry, (slots, pos, n))``."""
    def step(s):
        x, n, buf, pos, count, stride = s
        return (body(bc, x), n + 1) + save(x, n, buf, pos, count, stride, checkpoints)

    buf, pos, n = unsaved(carry, checkpoints)
    s = (carry, n, buf, pos, jnp.int32(0), jnp.int32(1))
    if go is None:
        x, n, buf, pos, _, _ = loop(lambda s: cond(cc, s[0]), step, s, checkpoints=checkpoints)
        return x, (buf, pos, n)

    def tested(s):
        s = step(s[1:])
        return (jnp.asarray(cond(cc, s[0]), bool).reshape(()),) + s

    _, x, n, buf, pos, _, _ = loop(lambda s: s[0], tested, (go,) + s, checkpoints=checkpoints)
    return x, (buf, pos, n)


def fori(n, fn, init, checkpoints, loop, free=None):
    """``lax.fori_loop(0, n, fn, init)`` for a traced ``n``, as a ``while_loop``
    of this module: the passes of a gradient are differentiable in turn
    (``jax.grad`` of ``jax.grad``). ``free``: a tree like ``init`` of bools, True for
    the carries ``fn`` writes only at steps below ``n`` (``while_loop``'s ``free``)."""
    _, out = loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fn(c[0], c[1])),
                  (jnp.int32(0), init), checkpoints=checkpoints,
                  free=None if free is None else (False, free))
    return out


def _advance(body, bc, x, k, checkpoints, loop):
    return fori(k, lambda i, x: body(bc, x), x, checkpoints, loop)


def _split(gap, nfree, sweep, slots):
    """How many parts ``m + 1`` to cut a gap of ``gap`` steps into (``m`` saves),
    with ``nfree`` free slots, so that the parts end up shorter than ``sweep``:
    cutting into ``b`` parts at each of ``L = ceil(log_b((gap + 1) / sweep))``
    levels uses ``(b - 1) L`` slots at most and recomputes each step about
    ``L (b - 1) / b`` times; the ``b`` with the fewest recomputations among those
    whose slots are free (``b = 2``, bisection, when none fits)."""
    b = jnp.arange(2, slots + 2, dtype=jnp.float32)
    ratio = jnp.maximum((gap + 1).astype(jnp.float32) / sweep, 1.0)
    levels = jnp.maximum(1.0, jnp.ceil(jnp.log(ratio) / jnp.log(b) - 1e-4))
    fits = (b - 1) * levels <= nfree
    cost = jnp.where(fits, levels * (b - 1) / b, jnp.inf)
    m = counting.argmin(cost) + 1
    return jnp.where(counting.any_(fits), m, 1)


def next_round(t, pos, n, window, checkpoints):
    """A round of the backward pass (``backward``) that reverses step ``t`` next, with
    saves at ``pos`` (``n`` steps in all), its sweeps at most ``window`` steps long:
    ``(split, slot, free, start, q)``: recompute from the save in ``slot`` (step
    ``pos[slot]``) to step ``q``; where ``split``, save that carry in the free slot
    ``free`` (then the round reverses nothing), else sweep: reverse steps ``t`` down to
    ``start == q``."""
    size, _, _ = _layout(checkpoints)
    live = pos[:size]
    below = jnp.where((live >= 0) & (live <= t), live, -1)
    slot = counting.argmax(below)
    gap = t - below[slot]
    free = counting.first(live < 0)
    nfree = counting.count(live < 0)
    split = (gap >= window) & (nfree > 0)
    # a short gap sweeps from the lowest save within reach instead, so that
    # one round reverses up to `window` steps
    near = gap < window
    reach = jnp.where((live >= 0) & (live >= t - (window - 1)) & (live <= t), live, size + n)
    slot = jnp.where(near, counting.argmin(reach), slot)
    start = jnp.where(near, pos[slot], t - (window - 1))
    m = _split(gap, nfree, window, size)
    q = jnp.where(split, t - gap + (gap + 1 + m) // (m + 1), start)
    return split, slot, free, start, q


def after_round(buf, pos, split, free, q, start, t, xq, checkpoints):
    """The saves after a round (``next_round``): the carry ``xq`` of step ``q`` saved in
    slot ``free`` where the round split the gap; the saves a sweep covered freed.
    Returns ``(buf, pos, t)``, ``t`` the step to reverse next."""
    size, _, _ = _layout(checkpoints)
    slot = jnp.where(split, free, size)
    buf = _write(buf, slot, xq)
    pos = pos.at[slot].set(jnp.where(split, q, -1))
    pos = jnp.where(~split & (pos >= start) & (pos <= t), -1, pos)
    # (q <= t in every state the forward pass saved; the minimum keeps the loop
    # finite on the rows a masked lane reads under vmap, which hold no state)
    return buf, pos, jnp.where(split, t, jnp.minimum(q, t) - 1)


def backward(body, bc, saved, out_ct, bc_avals, carry_avals, checkpoints, loop, zero=()):
    """Reverse steps ``n-1 .. 0``, from the last to the first.

    Each round looks at the gap between the step ``t`` to reverse next and the
    nearest saved carry ``p <= t``. A gap shorter than the sweep buffer
    (``checkpoints // 3`` carries, at most 64) is swept: its carries are recomputed into
    the buffer, then reversed one by one. A longer gap is split: the carry
    ``step`` steps above ``p`` is saved in a free slot, ``step`` being the length
    of the first of the ``m + 1`` equal parts the gap would be cut into, where
    ``m`` (``_split``) spends the free slots best over the levels of splitting
    the gap needs (bisection when slots are scarce, more parts when they are
    not). The next round sees the same gap less ``step`` above the new save, so
    the gap is cut into its parts by one pass over it. With no free slot left,
    the last ``sweep`` steps before ``t`` are recomputed from ``p`` and swept.
    """
    buf, pos, n = saved
    size, _, sweep_len = _layout(checkpoints)
    fi = [i for i, a in enumerate(carry_avals) if inexact(a)]
    fb = [i for i, a in enumerate(bc_avals) if inexact(a)]

    def step_vjp(x, ct, ct_bc):
        def f(bcf, xf):
            bc2 = list(bc)
            for i, v in zip(fb, bcf):
                bc2[i] = v
            x2 = list(x)
            for i, v in zip(fi, xf):
                x2[i] = v
            out = body(tuple(bc2), tuple(x2))
            return tuple(out[i] for i in fi)

        _, pull = jax.vjp(f, tuple(bc[i] for i in fb), tuple(x[i] for i in fi))
        g_bc, g_x = jx.pull_sparse(pull, ct, zero)
        return g_x, tuple(a + b for a, b in zip(ct_bc, g_bc))

    def sweep(args):
        x0, length, ct, ct_bc = args

        def fill(j, c):
            x, sb = c
            return body(bc, x), _write(sb, j, x)

        _, sb = fori(length, fill, (x0, _slots(x0, sweep_len)), checkpoints, loop)

        def back(j, c):
            x = tuple(b[length - 1 - j] for b in sb)
            return step_vjp(x, *c)

        return fori(length, back, (ct, ct_bc), checkpoints, loop)

    def loop_body(s):
        t, buf, pos, ct, ct_bc = s
        split, slot_p, free, start, q = next_round(t, pos, n, sweep_len, checkpoints)
        xp = tuple(b[slot_p] for b in buf)
        xq = _advance(body, bc, xp, q - pos[slot_p], checkpoints, loop)
        ct, ct_bc = lax.cond(split, lambda a: a[2:],
                             sweep, (xq, t - q + 1, ct, ct_bc))
        buf, pos, t = after_round(buf, pos, split, free, q, start, t, xq, checkpoints)
        return t, buf, pos, ct, ct_bc

    ct0 = tuple(out_ct[i] for i in fi)
    ct_bc0 = tuple(jnp.zeros(bc_avals[i].shape, bc_avals[i].dtype) for i in fb)
    s = (n - 1, buf, pos, ct0, ct_bc0)
    _, _, _, ct, ct_bc = loop(lambda s: s[0] >= 0, loop_body, s, checkpoints=checkpoints)
    ct_carry = [jx.Zero(a.to_ct_aval()) for a in carry_avals]
    for i, v in zip(fi, ct):
        ct_carry[i] = v
    ct_bcs = [jx.Zero(a.to_ct_aval()) for a in bc_avals]
    for i, v in zip(fb, ct_bc):
        ct_bcs[i] = v
    return tuple(ct_bcs), tuple(ct_carry)
