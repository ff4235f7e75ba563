"""State a converted statement changes besides its carried variables.

A converted ``if``/``while``/``for`` passes its variables explicitly, but
Python code also changes *shared* state: attributes (``s.x = v``,
``self.n += 1``) and the contents of lists and dicts (``out.append(v)``,
``cfg["a"]["b"] = v``, ``log.append(v)`` on a module-level list). The
rewriter names that state at the call site::

    n = af.if_stmt(c, if_true, if_false, (n,), ('n',),
                   state=af.state(attrs=((s, 'x'),), objects=(out,)))

and the operator uses a ``Shared`` object to give it Python's meaning when
it stages the statement:

* before each staged branch (and each traced loop iteration) the state is
  put back to what it was before the statement, so no branch sees what the
  other one did and nothing leaks from the branch not taken;
* its values travel through ``lax`` as extra carries (attribute values, and
  container contents as lists/dicts of their items);
* afterwards the chosen values are written back *in place*: the same list
  and dict objects hold the new items (an alias or a global sees them), and
  an attribute that did not exist before and was not set stays absent.

On concrete values the operators run the branch or loop as Python, which
changes the state in place as Python does; ``Shared`` is then unused.

Writes through calls. A function called in a staged branch or loop body runs
once, at trace time, for every path and iteration. Its writes are marked
(``transforms.writes``: ``af.mutates``, ``af.mutates_global``,
``af.rebinds_global``, ``af.rebinds_nonlocal``, and ``af.setitem`` itself), and
each staged statement being traced is a ``_Scope`` that judges them:

* state the statement carries already (its ``state=``, its variables): fine;
* state that existed before the statement and that its variables or its
  functions' closures reach: carried too (``recording.missing`` retraces the
  statement with it);
* module state (a global, what a global holds, a closure cell of a
  module-level function): it outlives every call, and the compiled code cannot
  change it as Python would at each call and iteration. autoflow raises
  ``ConversionError`` naming it and the writing line, before the write;
* a closure cell (``nonlocal``) the statement does not carry: the same error;
* anything else was made inside the statement (new at every run): plain.

The modules: ``shared`` (``Shared``, ``settle``, ``af.state``), ``writes`` (the write
markers and their refusals), ``scopes`` (``recording``: the staged statements being
traced), ``journal`` (the per-thread stacks, ``journal``), ``reach`` (module state,
closure cells, what values hold), ``aliasing`` (``kept``, ``derived``), ``snapshots``
(containers saved and written back in place) and ``nnx`` (attributes, Flax NNX
``Variable``s included).
"""

from .shared import state
from .writes import mutates, mutates_global, rebinds_global, rebinds_nonlocal

__all__ = ["mutates", "mutates_global", "rebinds_global", "rebinds_nonlocal", "state"]
