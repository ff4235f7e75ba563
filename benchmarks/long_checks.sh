#!/usr/bin/env bash
# The long checks: what CI's slow tier samples to stay within CI's time, run whole.
#   * every slow test CI samples (SAMPLED in tests/conftest.py: AUTOFLOW_LONG=1);
#   * the composing fuzzer's slow run at 300 programs x 3 compositions (CI: 30 x 3);
#   * the composing fuzzer's long scan (COUNT programs, one composition each, default
#     10,000; about 2-3 s a program on one core);
# and records the summary lines in benchmarks/LONG_CHECKS.md (by hand: the script
# prints them). Usage: benchmarks/long_checks.sh [COUNT] [WORKERS]
set -uo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
workers=${2:-2}
py=${PYTHON:-.venv/bin/python}

echo "== the slow tier's corpora, whole (AUTOFLOW_LONG=1)"
AUTOFLOW_LONG=1 "$py" -m pytest -q --tier slow \
  2>&1 | tail -n 5
echo "== the composing fuzzer: $count programs"
"$py" -m tests.fuzz_compose 0 --scan "$count" --per-program 1 --workers "$workers" \
  --report /tmp/compose_scan.json 2>&1 | tail -n 30
