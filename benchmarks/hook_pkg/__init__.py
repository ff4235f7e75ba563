"""Plain Python with control flow on concrete values, for benchmarks/hook_overhead.py."""
