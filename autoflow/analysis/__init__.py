"""Static analysis on gast trees: activity (reads/writes), liveness, definedness.

Nothing in this package imports jax.
"""
