"""The one file of autoflow that names JAX's private modules (``jax._src``).

Each function runs one ``from jax._src... import ...`` statement when called, as the
code that calls it did before (a missing name raises ``ImportError`` there, inside
the check of its row of ``paths.PATHS``); the constants are the names of JAX's
private loggers and files autoflow looks for."""

from __future__ import annotations

import os

PREFIX = "jax._src"  # the package of JAX's private modules
DEBUGGING_LOGGER = "jax._src.debugging"  # the logger failed debug callbacks report to
CALLBACK_LOGGER = "jax._src.callback"  # ... and failed pure callbacks
CUSTOM_DERIVATIVES = os.path.join("jax", "_src", "custom_derivatives.py")


def ad_util():
    from jax._src import ad_util
    return ad_util


def api_util():
    from jax._src import api_util
    return api_util


def core():
    from jax._src import core
    return core


def debugging_ordered_debug_effect():
    from jax._src.debugging import ordered_debug_effect
    return ordered_debug_effect


def flattree():
    from jax._src import flattree
    return flattree


def hijax():
    from jax._src import hijax
    return hijax


def interpreters_ad():
    from jax._src.interpreters import ad
    return ad


def interpreters_batching():
    from jax._src.interpreters import batching
    return batching


def interpreters_mlir():
    from jax._src.interpreters import mlir
    return mlir


def interpreters_partial_eval():
    from jax._src.interpreters import partial_eval
    return partial_eval


def lax_control_flow_conditionals_cond_p():
    from jax._src.lax.control_flow.conditionals import cond_p
    return cond_p


def lax_control_flow_loops_while_p():
    from jax._src.lax.control_flow.loops import while_p
    return while_p


def lax_lax_convert_element_type():
    from jax._src.lax.lax import _convert_element_type
    return _convert_element_type


def lib_mlir_dialects_hlo():
    from jax._src.lib.mlir.dialects import hlo
    return hlo


def source_info_util():
    from jax._src import source_info_util
    return source_info_util


def traceback_util():
    from jax._src import traceback_util
    return traceback_util


def tree_util_FlatTree():
    from jax._src.tree_util import FlatTree
    return FlatTree
