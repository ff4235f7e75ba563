"""Source handling for the rewriter: parsing, templates, naming, loading.

Nothing in this package imports jax.
"""
