"""What the ``if``, the loops and the rest of the runtime share.

* ``values``: traced or concrete, array-like or not, ``Undefined``, pytrees;
* ``carries``: what a staged ``if`` or loop carries, and the bookkeeping both share;
* ``coupling``: what a traced ``if`` and a staged loop tell each other (``now``);
* ``primitives``: helpers the ``if`` and loop primitives share;
* ``events``: what each statement lowered to, for ``autoflow explain``;
* ``teach``: JAX's tracing errors re-issued in the user's terms; ``advice``: what to
  do about a value a staged statement cannot carry.
"""
