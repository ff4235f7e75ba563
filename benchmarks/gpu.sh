#!/usr/bin/env bash
# The benchmarks whose answer a GPU may change, in one run on a machine with
# one (what benchmarks/GPU.md reports came from this script):
#   real_algorithms.py  natural Python vs the JAX libraries, steady state and
#                       under vmap (first calls: fresh processes, a few only);
#   select_cost.py      where a select stops being cheaper than lax.cond;
#   guard_select.py     the rest of a loop body after a break: select or cond;
#   run.py              hand-written lax programs, call overhead;
#   scalar_select.py    scalar branches: a cond for every one, or autoflow's rule;
#   loop_kernels.py     what the loops of a few programs launch per iteration.
# Each step has its own time limit, so one slow step leaves the others' results.
#
#   OUT=dir bash benchmarks/gpu.sh     (gast missing there: GAST_WHEEL=path/to/gast.whl)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/autoflow-gpu}
mkdir -p "$OUT"
if [ -n "${GAST_WHEEL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$GAST_WHEEL" || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
step() {  # step NAME SECONDS COMMAND...: output in $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local t=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t)) s"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import jax, gast, autoflow; print('jax', jax.__version__, jax.devices())" || exit 1
step real_algorithms 200 python3 benchmarks/real_algorithms.py --no-first \
  --out "$OUT/real_algorithms.md" --rows-json "$OUT/real_algorithms.json"
step select_cost 45 python3 benchmarks/select_cost.py
step guard_select 60 python3 benchmarks/guard_select.py --rounds 5
step run 90 python3 benchmarks/run.py --sections runtime,overhead --json "$OUT/run.json" \
  --markdown "$OUT/run.md"
step scalar_select 100 python3 benchmarks/scalar_select.py --only bisection gammainc \
  first_above_return prefix_sum_threshold --rounds 11
step loop_kernels 40 python3 benchmarks/loop_kernels.py mandelbrot_vmap bisection gammainc --lines
step first_call "${FIRST_CALL_SECONDS:-120}" python3 benchmarks/real_algorithms.py --quick \
  --only bfgs cg odeint --out "$OUT/first_call.md"
