"""User functions that autoflow must refuse (or report on) clearly.

Each file is a real module so that ``linecache`` and tracebacks can show its
lines. ``# ERROR`` marks the line a message or traceback must point at.
"""
