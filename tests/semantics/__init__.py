"""Python-semantics tests: each program is ordinary Python, and Python run eagerly is the oracle."""
