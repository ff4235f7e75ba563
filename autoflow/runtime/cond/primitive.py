"""The ``if`` primitive: one staged ``if`` of two traced branches, with its rules.

Plain Python::

    def choose(pred, true_fn, false_fn):
        return true_fn() if pred else false_fn()

``stage_if`` traces both branches to jaxprs, asks the cost rule
(``cond.select_or_cond.decide``) for a ``lax.cond`` or a select, and stages ``_Cond``,
whose rules for ``vmap``, ``jvp`` and ``grad`` are its own (see its
docstring), so the choice survives any order of ``jit``, ``vmap`` and
``grad``, and gradients are always those of a cond. Where JAX's private API
does not allow autoflow's own primitives (``runtime.jax``), every traced
``if`` is a plain ``lax.cond``.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax import numpy as jnp

from .. import jax as jx
from ..loops import lanes
from ..jax import selfcheck
from .select_or_cond import GPU_PLATFORMS, GPU_SELECT, decide, gating, in_lanes, under_lanes
from ..common.coupling import now
from ..common.events import plain_now
from ..common.primitives import RunsForItsEffects, inexact, instantiate, quiet_closed


def _select(pred, a, b):
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.dtype != b.dtype:  # only weak types can differ here: promote as JAX would
        dtype, weak = jax.dtypes.result_type(a, b, return_weak_type_flag=True)
        convert = jx.convert_weak if weak else lax.convert_element_type
        a, b = convert(a, dtype), convert(b, dtype)  # (weak both: 3 and 4.5 give a weak 4.5)
    if jx.typeof(a).weak_type != jx.typeof(b).weak_type:
        a, b = lax.convert_element_type(a, a.dtype), lax.convert_element_type(b, b.dtype)
    if jnp.ndim(pred) and jnp.ndim(pred) < jnp.ndim(a):  # a batched predicate (B,)
        pred = lax.broadcast_in_dim(pred, jnp.shape(a), tuple(range(jnp.ndim(pred))))
    return lax.select(pred, a, b)


def _pick(pred, t_out, f_out, free=()):
    """The select of the branches' outputs, but for those at the indices ``free``
    (nothing reads them where ``pred`` is false), taken from the true branch."""
    return tuple(a if i in free else _select(pred, a, b)
                 for i, (a, b) in enumerate(zip(t_out, f_out)))


def _vjp(closed, args, ct):
    """Cotangents of ``closed``'s inexact inputs, for ``ct`` on its inexact outputs."""
    fi = [i for i, a in enumerate(closed.in_avals) if inexact(a)]
    fo = [j for j, a in enumerate(closed.out_avals) if inexact(a)]

    def f(*xs):
        full = list(args)
        for i, x in zip(fi, xs):
            full[i] = x
        outs = jx.eval_jaxpr(closed, (), *full)
        return [outs[j] for j in fo]

    _, pull = jax.vjp(f, *[args[i] for i in fi])
    return list(pull([ct[j] for j in fo]))


class _Cond(RunsForItsEffects, jx.HiPrimitive):
    """A traced ``if`` of two branches (jaxprs taking their operands, no consts),
    as one primitive with a rule per transformation, so that where ``jit``,
    ``vmap`` and ``grad`` sit around it does not matter:

    * evaluated or compiled: a select of both branches (``kind='select'``) or
      a ``lax.cond`` (``kind='cond'``);
    * ``vmap`` (``batch``): the same ``if`` one level up (``inner``: the
      primitive it batches, ``axes``: which operands are batched). With a
      batched predicate it is a select of both branches, run on the operands
      as they are: a matrix the branches only read is not copied per lane
      (JAX's own ``cond`` batching rule broadcasts every operand). Otherwise
      the ``vmap`` of the inner ``if``;
    * ``jax.jvp``/``jax.jacfwd``: JAX's JVP of the form above;
    * ``jax.grad``/``jax.vjp``: the values are the form above; the cotangents
      come from a ``lax.cond`` of the branches' VJPs (one per lane under a
      batched predicate), so the branch not taken never reaches a gradient
      (``sqrt(x) if x > 0 else 0.`` has gradient 0 at 0, as in Python, not the
      ``nan`` of a select's gradient).
    """

    stage_low = True  # staged as a low equation (see runtime.jax)
    primitive_name = "if"  # what jax.make_jaxpr and HLO op names call it

    def __call__(self, *args):
        return jx.bind(self, args)

    def __init__(self, t, f, kind, in_avals, inner=None, axes=None, size=None, masked=False,
                 free=(), select_on=()):
        self.in_avals = in_avals  # (predicate, true operands, false operands)
        if inner is None:
            self.out_aval = tuple(t.out_avals)
        else:
            self.out_aval = tuple(_unmapped(a, 0, size) for a in inner.out_aval)
        # masked: the last operand of each branch is the mask of the lanes whose
        # results are read (runtime/loops/lanes.py); the loops in the branches run only
        # for them.
        # free: outputs nothing reads where the predicate is false (a loop's guard
        # on the iteration that leaves it): a select takes the true branch's.
        # select_on: the platforms on which a cond-kind `if` is lowered as a select
        # (scalar branches on a GPU, see GPU_SCALAR_SELECT_OUTPUTS).
        self.params = dict(t=t, f=f, kind=kind, inner=inner, axes=axes, size=size,
                           masked=masked, free=tuple(free), select_on=tuple(select_on))
        # a branch that prints or checks: staged as a cond (`cond.select_or_cond.decide`), whose
        # effects happen when the compiled code runs
        self.effects = (frozenset(t.effects) | frozenset(f.effects)) if inner is None \
            else inner.effects
        self.source_info = jx.source_here()  # (for an internal error's line)
        super().__init__()

    # -- meaning --------------------------------------------------------------

    def quiet(self):
        """This ``if`` without debug callbacks (what a backward pass recomputes)."""
        if not self.effects:
            return self
        quiet = self.__dict__.get("_quiet")
        if quiet is None:
            p = self.params
            quiet = self.__dict__["_quiet"] = _Cond(
                quiet_closed(p["t"]), quiet_closed(p["f"]), p["kind"], self.in_avals,
                None if p["inner"] is None else p["inner"].quiet(), p["axes"], p["size"],
                p["masked"], p["free"], p["select_on"])
        return quiet

    def _split(self, ops):
        """A branch's operands without this level's lane mask, and the mask."""
        if self.masked:
            return tuple(ops[:-1]), ops[-1]
        return tuple(ops), None

    def _inner_axes(self):
        dp, dt, df = self.axes
        return (dp, dt[:-1], df[:-1]) if self.masked else (dp, dt, df)

    def branch(self, which, ops):
        """One branch's outputs on its operands, at this level."""
        if self.inner is None:
            # (a `jit` in the branch runs in place: the lanes' mask reaches its loops)
            return jx.eval_inlined(self.t if which == "t" else self.f, (), *ops)
        ops, needed = self._split(ops)
        axes = self._inner_axes()[1 if which == "t" else 2]
        return tuple(lanes.vmap(lambda o: self.inner.branch(which, o), (axes,), 0, self.size,
                                needed)(tuple(ops)))

    def both(self, pred, tc, fc):
        """The select of both branches' outputs."""
        if self.inner is None:
            return _pick(pred, jx.eval_inlined(self.t, (), *tc), jx.eval_inlined(self.f, (), *fc),
                         self.free)
        (tc, needed), (fc, _) = self._split(tc), self._split(fc)
        if self.axes[0] is not None and jnp.ndim(pred) == 1:
            # A batched predicate: each branch runs for the lanes that take it
            # (its loops only for those), and the select picks per lane.
            _, ta, fa = self._inner_axes()
            take_t, take_f = pred, jnp.logical_not(pred)
            if needed is not None:
                take_t, take_f = take_t & needed, take_f & needed
            t_out = lanes.vmap(lambda o: self.inner.branch("t", o), (ta,), 0, self.size,
                               take_t)(tc)
            f_out = lanes.vmap(lambda o: self.inner.branch("f", o), (fa,), 0, self.size,
                               take_f)(fc)
            return _pick(pred, t_out, f_out, self.free)
        return tuple(lanes.vmap(self.inner.both, self._inner_axes(), 0, self.size, needed)(
            pred, tc, fc))

    def expand(self, pred, tc, fc):
        if self.inner is None:
            if self.kind == "select":
                return self.both(pred, tc, fc)
            branches = self._cond_branches()
            if branches is not None:
                # JAX's cond of the branches' jaxprs as they are (each taking both
                # operand lists), without tracing them again: lowering a nest of
                # loops and ifs then costs one pass over it.
                index = lax.convert_element_type(pred, np.int32)
                return tuple(jx.cond_p.bind(index, *tc, *fc, branches=branches))
            return tuple(lax.cond(pred, lambda: jx.eval_jaxpr(self.t, (), *tc),
                                  lambda: jx.eval_jaxpr(self.f, (), *fc)))
        if self.axes[0] is not None:  # a batched predicate: both branches run
            return self.both(pred, tc, fc)
        if self._cond_at_bottom():
            # A predicate batched at no level, and a cond at the bottom: the cond, whose
            # branches are the branches batched at every level. (The vmap of the
            # bottom's cond would be JAX's cond batching rule, which batches the
            # branches in a trace of its own, where this level's lane mask cannot reach
            # the loops in them: loops.lanes.mask_for.) The operands are the cond's own, so
            # the mask is a value of the trace each branch is traced in.
            (tc, needed), (fc, _) = self._split(tc), self._split(fc)

            def branch(which, ops, needed):  # one branch batched here, for the needed lanes
                axes = self._inner_axes()[1 if which == "t" else 2]
                return tuple(lanes.vmap(lambda o: self.inner.branch(which, o), (axes,), 0,
                                        self.size, needed)(tuple(ops)))
            return tuple(lax.cond(pred, lambda t, f, m: branch("t", t, m),
                                  lambda t, f, m: branch("f", f, m), tc, tuple(fc), needed))
        (tc, needed), (fc, _) = self._split(tc), self._split(fc)
        return tuple(lanes.vmap(self.inner.expand, self._inner_axes(), 0, self.size, needed)(
            pred, tc, fc))

    def _cond_at_bottom(self):
        """Is the predicate batched at no level, and the ``if`` at the bottom a cond?"""
        level = self
        while level.inner is not None:
            if level.axes[0] is not None:
                return False
            level = level.inner
        return level.kind == "cond"

    def low_form(self, platforms=()):
        """What this is in JAX's own terms, for the lowering rule of ``runtime.jax`` when
        compiling for ``platforms``: ``("select", t, f, n, free)``,
        ``("cond", branches)``, or None (then ``expand`` is traced)."""
        if self.inner is not None or tuple(self.in_avals[0].shape) != ():
            return None
        t, f = self.t, self.f
        select = self.kind == "select" or bool(platforms) and all(
            p in self.select_on for p in platforms)
        if select:
            if t.consts or f.consts or t.effects or f.effects or any(
                    (a.shape, a.dtype) != (b.shape, b.dtype)
                    for i, (a, b) in enumerate(zip(t.out_avals, f.out_avals))
                    if i not in self.free):
                return None
            return ("select", t, f, len(self.in_avals[1]), frozenset(self.free))
        branches = self._cond_branches()
        return None if branches is None else ("cond", branches)

    def _cond_branches(self):
        """``(false, true)`` jaxprs taking the true and the false operands, for
        ``cond_p`` (None where JAX's internals differ, or the branches' output
        types differ in more than weak typing)."""
        t, f = self.t, self.f
        if jx.cond_p is None or t.consts or f.consts or t.effects or f.effects or any(
                (a.shape, a.dtype) != (b.shape, b.dtype)
                for a, b in zip(t.out_avals, f.out_avals)):
            return None
        try:
            invars = [*t.jaxpr.invars, *f.jaxpr.invars]  # each branch ignores the other's
            return (jx.ClosedJaxpr(f.jaxpr.replace(invars=invars), ()),
                    jx.ClosedJaxpr(t.jaxpr.replace(invars=invars), ()))
        except (AttributeError, TypeError):  # pragma: no cover - another JAX
            return None

    # -- forward mode -----------------------------------------------------------

    def jvp(self, primals, tangents):
        pred, tc, fc = primals
        ttc, tfc = (instantiate(t, a) for t, a in zip(tangents[1:], self.in_avals[1:]))
        if self.inner is None and not self.free and not jx.in_custom_rule() \
                and not jx.partially_evaluated():
            return self._jvp_if(pred, tc, fc, ttc, tfc)
        out, tout = jax.jvp(lambda tc, fc: self.expand(pred, tc, fc), (tuple(tc), tuple(fc)),
                            (ttc, tfc))
        tout = tuple(t if inexact(a) else jx.Zero(a.to_tangent_aval())
                     for t, a in zip(tout, self.out_aval))
        return tuple(out), tout

    def _jvp_if(self, pred, tc, fc, ttc, tfc):
        """The ``if`` of the branches' JVPs, an ``if`` of autoflow's: under a ``vmap``
        around it, a loop in a branch runs only for the lanes that take the branch
        (JAX's own ``cond``, batched, runs both branches for every lane, and a loop the
        lane does not reach may never end for it)."""
        exact = [i for i, a in enumerate(self.out_aval) if inexact(a)]

        def branch(jaxpr, ops, tans):
            def run():
                out, tout = jax.jvp(lambda *o: jx.eval_jaxpr(jaxpr, (), *o), tuple(ops),
                                    tuple(tans))
                return [*out, *(tout[i] for i in exact)]
            return jx.trace_thunk(run)

        t, f = branch(self.t, tc, ttc), branch(self.f, fc, tfc)
        outs = _staged_if(pred, t, f, self.kind, select_on=self.params["select_on"])
        n = len(self.out_aval)
        touts = iter(outs[n:])
        return tuple(outs[:n]), tuple(next(touts) if inexact(a) else jx.Zero(a.to_tangent_aval())
                                      for a in self.out_aval)

    def lin(self, nzs_in, *primals):
        # (bound one level up: vmapped, its batching rule masks the loops of the branches;
        # where JAX partially evaluates it, `jax.checkpoint`, its expansion, which it splits)
        if jx.in_custom_rule():
            return self.expand(*primals), primals
        return self(*primals), primals

    def linearized(self, residuals, *tangents):
        return self.quiet().jvp(residuals, tangents)[1]  # (the effects ran in `lin`)

    # -- reverse mode -----------------------------------------------------------

    def vjp_fwd(self, nzs_in, pred, tc, fc):
        out = self.expand(pred, tc, fc) if jx.in_custom_rule() else self(pred, tc, fc)
        return out, (pred, tc, fc)

    def bwd(self, pred, tc, fc, ct):
        """Cotangents of the inexact operands of each branch (two lists)."""
        if self.inner is None:
            def zeros(avals):
                return [jnp.zeros(a.shape, a.dtype) for a in avals if inexact(a)]

            def true_side():
                return _vjp(self.t, tc, ct), zeros(self.in_avals[2])

            def false_side():
                return zeros(self.in_avals[1]), _vjp(self.f, fc, ct)

            if jx.in_custom_rule():
                return lax.cond(pred, true_side, false_side)
            # (an `if` of autoflow's: under a `vmap` around the gradient a loop the
            # branch's VJP runs again runs only for the lanes that take the branch)
            t, f = (jx.trace_thunk(lambda side=side: [v for part in side() for v in part])
                    for side in (true_side, false_side))
            outs = _staged_if(pred, t, f, "cond")
            n = sum(inexact(a) for a in self.in_avals[1])
            return list(outs[:n]), list(outs[n:])
        (tc, _), (fc, _) = self._split(tc), self._split(fc)
        gt, gf = jax.vmap(self.inner.bwd, (*self._inner_axes(), 0), 0, axis_size=self.size)(
            pred, tc, fc, ct)
        _, ta, fa = self._inner_axes()
        # an operand shared by every lane gets the sum of the lanes' cotangents
        inexact_axes = [[d for d, a in zip(ax, avals) if inexact(a)]
                        for ax, avals in ((ta, self.inner.in_avals[1]),
                                          (fa, self.inner.in_avals[2]))]
        return ([g if d is not None else jnp.sum(g, 0) for g, d in zip(gt, inexact_axes[0])],
                [g if d is not None else jnp.sum(g, 0) for g, d in zip(gf, inexact_axes[1])])

    def vjp_bwd_retval(self, res, out_ct):
        pred, tc, fc = res
        ct = tuple(jnp.zeros(a.shape, a.dtype) if isinstance(c, jx.Zero) and inexact(a)
                   else c for c, a in zip(out_ct, self.out_aval))
        gt, gf = self.quiet().bwd(pred, tc, fc, ct)  # (the effects ran in `vjp_fwd`)

        def spread(grads, avals):
            grads, out = iter(grads), []
            for a in avals:
                out.append(next(grads) if inexact(a) else jx.Zero(a.to_ct_aval()))
            return tuple(out)

        return (jx.Zero(self.in_avals[0].to_ct_aval()),
                spread(gt, self.in_avals[1]), spread(gf, self.in_avals[2]))

    # -- vmap -------------------------------------------------------------------

    def batch(self, axis_data, args, dims):
        size = axis_data.size

        def moved(x, d):
            return x if d is None else jnp.moveaxis(jnp.asarray(x), d, 0)

        def axis(d):
            return None if d is None else 0

        pred, tc, fc = args
        dp, dt, df = dims
        args = (moved(pred, dp), tuple(map(moved, tc, dt)), tuple(map(moved, fc, df)))
        axes = (axis(dp), tuple(map(axis, dt)), tuple(map(axis, df)))
        needed = lanes.mask_for(axis_data)  # lanes whose results are read (None: all)
        if needed is not None:
            args = (args[0], args[1] + (needed,), args[2] + (needed,))
            axes = (axes[0], axes[1] + (0,), axes[2] + (0,))
        in_avals = tuple(jx.typeof(x) for x in args[:1]) + tuple(
            tuple(jx.typeof(x) for x in group) for group in args[1:])
        prim = _Cond(self.t, self.f, self.kind, in_avals, inner=self, axes=axes, size=size,
                     masked=needed is not None, free=self.free)
        outs = prim(*args)
        flags = self._batched_outputs(axis_data, dt, df) if dp is None else None
        if flags is None or all(flags):
            return outs, tuple(0 for _ in self.out_aval)
        # An output that depends on no batched operand is one value for every lane (JAX's
        # own `cond` says so): a primal result under `jax.jacfwd`, whose `vmap` over the
        # tangents requires it. Taken from a lane whose result is read (where a loop ran).
        pick = 0 if needed is None else jnp.argmax(needed)
        return (tuple(o if f else o[pick] for o, f in zip(outs, flags)),
                tuple(0 if f else None for f in flags))

    def _batched_outputs(self, axis_data, dt, df):
        """Which outputs of this ``if`` (at the bottom: ``inner`` None) depend on its
        operands batched at ``dt``/``df`` (the predicate is not), or None if unknown."""
        if self.inner is not None:
            return None
        key = (tuple(d is not None for d in dt), tuple(d is not None for d in df))
        memo = self.__dict__.setdefault("_out_batched", {})
        if key not in memo:
            probe = jx.probe_axis(axis_data) or axis_data
            try:
                _, ft = jx.batch_jaxpr(self.t, probe, key[0], False)
                _, ff = jx.batch_jaxpr(self.f, probe, key[1], False)
                memo[key] = tuple(a or b for a, b in zip(ft, ff))
            except Exception:  # noqa: BLE001 - (a branch JAX cannot batch so: all batched)
                memo[key] = None
        return memo[key]


def _unmapped(aval, d, size):
    if d is None:
        return aval
    return jx.ShapedArray((size,) + tuple(aval.shape), aval.dtype,
                             weak_type=getattr(aval, "weak_type", False))


def _operands(closed):
    """``closed`` (a ClosedJaxpr with consts) as a jaxpr taking its consts as operands."""
    jaxpr = jx.convert_constvars_jaxpr(closed.jaxpr)
    return jx.ClosedJaxpr(jaxpr, ()), list(closed.consts)


def _staged_if(pred, t, f, kind, free=(), select_on=()):
    if plain_now():  # autoflow explain: what it compiles to
        if kind == "select":
            return list(_pick(pred, jx.eval_jaxpr(t, ()), jx.eval_jaxpr(f, ()), free))
        return lax.cond(pred, lambda: jx.eval_jaxpr(t, ()), lambda: jx.eval_jaxpr(f, ()))
    tj, tc = _operands(t)
    fj, fc = _operands(f)
    pred = jnp.asarray(pred)
    in_avals = (jx.typeof(pred), tuple(jx.typeof(x) for x in tc),
                tuple(jx.typeof(x) for x in fc))
    return list(_Cond(tj, fj, kind, in_avals, free=free if kind == "select" else (),
                      select_on=select_on)(pred, tuple(tc), tuple(fc)))


def stage_if(pred, true_fn, false_fn, guard=False, free=lambda: ()):
    """``lax.cond(pred, true_fn, false_fn)`` for thunks returning lists of arrays,
    or a select of both when that is cheaper (see the module docstring).

    ``guard``: see ``cond.statements.if_stmt``; ``free()`` (called once both branches
    are traced): the indices of the outputs nothing reads where ``pred`` is
    false, which a select then takes from the true branch."""
    if not jx.primitives():  # JAX's private API differs (see runtime.jax): the cond
        now.choice = "lax.cond"
        return lax.cond(pred, true_fn, false_fn)
    batched = jx.is_batched(pred)
    if batched or under_lanes():
        # Under a batched predicate, runtime/loops/lanes.py masks the loops of the branches,
        # those of the `if`s inside them too (whose predicates, traced in the branch,
        # do not look batched yet): no gate.
        true_fn, false_fn = in_lanes(true_fn), in_lanes(false_fn)
    else:
        true_fn, false_fn = gating(true_fn, pred, False), gating(false_fn, pred, True)
    t = jx.trace_thunk(true_fn)
    f = jx.trace_thunk(false_fn)
    choice, why = decide(t, f, batched, guard)
    now.choice = choice  # (what it lowered to, for explain: `cond.statements._lowered_as`)
    if why == "a branch has effects" and (jx.in_custom_rule() or not selfcheck.effects_ok()):
        return lax.cond(pred, lambda: jx.eval_jaxpr(t, ()), lambda: jx.eval_jaxpr(f, ()))
    if jx.in_custom_rule():  # JAX's own operations, which partial evaluation can split
        if why == "batched predicate":  # (JAX's cond would stop_gradient the tangents)
            return [_select(pred, a, b)
                    for a, b in zip(jx.eval_jaxpr(t, ()), jx.eval_jaxpr(f, ()))]
        return lax.cond(pred, lambda: jx.eval_jaxpr(t, ()), lambda: jx.eval_jaxpr(f, ()))
    return _staged_if(pred, t, f, "select" if choice == "select" else "cond",
                      free() if guard else (),
                      select_on=GPU_PLATFORMS if choice == GPU_SELECT else ())


selfcheck.parts["staged_if"] = _staged_if

if jx.install_low_staging():  # staged as a low equation, named `if` (see runtime.jax)
    jx.name_primitives([_Cond])
