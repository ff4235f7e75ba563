"""``match`` on traced values: ``case True:``/``case False:``, and a subject left as Python."""

from __future__ import annotations

import numpy as np
import jax.numpy as jnp

from ...core.origin import Site, message, user_site
from ...errors import ConversionError
from ..common.values import is_traced


def match_is(subject, value):
    """``subject is value`` for ``case True:``/``case False:``; a traced boolean
    subject (what a Python bool becomes under ``jit``) compares its value."""
    if is_traced(subject):
        if jnp.asarray(subject).dtype == jnp.bool_ and np.size(subject) == 1:
            pred = jnp.asarray(subject).reshape(())
            return pred if value else ~pred
        return False
    return subject is value


def match_subject(subject, line, col):
    """The subject of a ``match`` that autoflow left as Python (its patterns
    are not all values and alternatives): it must be concrete."""
    if is_traced(subject):
        here = user_site(2)
        site = Site(here.filename, line, col) if here is not None else None
        raise ConversionError(message(
            site, "this `match` has a traced subject, but this case's pattern (a class, "
            "mapping or sequence pattern, or a capture inside `|` or with both `as` and a "
            "guard) cannot be staged",
            "On a traced value use only value patterns (`case 0 | 1:`, `case Mode.FAST:`), "
            "guards, and a final `case _:` or `case name:`; or make the subject static."))
    return subject
