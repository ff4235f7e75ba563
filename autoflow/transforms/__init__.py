"""The rewriter's passes, one construct per module; see ``pipeline``.

Nothing in this package imports jax.
"""
