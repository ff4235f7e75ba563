import os

# The project's own tests run strict (every fallback is an error) unless a
# test says otherwise; see the README's fallback policy.
os.environ.setdefault("AUTOFLOW_STRICT", "1")
