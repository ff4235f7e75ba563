#!/usr/bin/env bash
# autoflow's core tests on every JAX minor release the package registry offers,
# from the floor in pyproject.toml ("jax>=...") to the newest: one fresh virtual
# environment per release (the newest patch of each minor), installed the way
# .ci/run installs its oldest-JAX stage. Writes a Markdown table to
# benchmarks/JAX_MATRIX.md and prints it.
#
#   bash benchmarks/jax_matrix.sh
#   PY=python3.12 VERSIONS="0.4.38 0.10.2" KEEP=1 bash benchmarks/jax_matrix.sh
#
# PY        the interpreter for the environments (default python3; pyenv names
#           such as python3.12 are resolved with `pyenv which`)
# VERSIONS  the JAX versions to test, instead of the ones derived from the registry
# WORK      where the environments and logs go (default /tmp/autoflow-jax-matrix)
# KEEP=1    keep each environment (they are deleted after their row otherwise)
# TESTS     the test paths (default: the core subset .ci/run uses (test_jax_paths with it), plus test_jax_internals)
# LIMIT     seconds one version's test run may take (default 3600)
# OUT       the Markdown file (default benchmarks/JAX_MATRIX.md)
#
# Everything runs under `nice -n 15`: the script starts itself again under nice.
set -euo pipefail

if [ -z "${AF_MATRIX_NICED:-}" ]; then
  AF_MATRIX_NICED=1 exec nice -n 15 bash "$0" "$@"
fi

cd "$(dirname "$0")/.."
REPO=$PWD
WORK=${WORK:-/tmp/autoflow-jax-matrix}
TESTS=${TESTS:-tests/test_fixtures.py tests/test_vocabulary.py tests/test_errors.py tests/semantics tests/test_jax_paths.py tests/test_jax_internals.py}
LIMIT=${LIMIT:-3600}
OUT=${OUT:-benchmarks/JAX_MATRIX.md}
HELPER=$REPO/benchmarks/jax_matrix.py

# The interpreter: a path, or a command name looked up in pyenv's versions
# (python3.12 lives in one that is not the default) and then on PATH.
PY=${PY:-python3}
PYBIN=
if command -v pyenv > /dev/null; then
  PYBIN=$(pyenv which "$PY" 2>/dev/null) ||
    PYBIN=$(find "$(pyenv root)/versions" -maxdepth 3 -path "*/bin/$PY" 2>/dev/null | sort -V | tail -n 1)
fi
[ -n "$PYBIN" ] || PYBIN=$(command -v "$PY") || { echo "error: no interpreter $PY" >&2; exit 1; }
PYVER=$("$PYBIN" -c 'import platform; print(platform.python_version())')

# The versions: the newest patch of each minor from the floor up, unless given.
FLOOR=$(sed -n 's/.*"jax>=\([0-9.]*\)".*/\1/p' pyproject.toml)
if [ -z "${VERSIONS:-}" ]; then
  VERSIONS=$("$PYBIN" -m pip index versions jax 2>/dev/null | "$PYBIN" "$HELPER" versions "$FLOOR")
fi
read -r -a VERSION_LIST <<< "$VERSIONS"

mkdir -p "$WORK/logs"
RESULTS=$WORK/results.tsv
: > "$RESULTS"
echo "python $PYVER ($PYBIN), floor jax $FLOOR, versions: ${VERSION_LIST[*]}"
echo "work dir $WORK; tests: $TESTS"

# The last line that looks like an error in a pip log, shortened to one line.
install_error() {
  local line
  line=$(grep -E '^(ERROR|error):' "$1" | grep -v 'pip.*dependency resolver' | tail -n 1 || true)
  [ -n "$line" ] || line=$(grep -v '^\s*$' "$1" | tail -n 1 || true)
  echo "${line:0:200}" | tr '\t' ' '
}

# One row of results.tsv: version, status, jax, python, wall, import warning, log, reason.
row() {
  local IFS=$'\t'
  echo "$*" >> "$RESULTS"
}

START=$SECONDS
for V in "${VERSION_LIST[@]}"; do
  VENV=$WORK/$V
  LOG=$WORK/logs/$V.log
  INSTALL_LOG=$WORK/logs/$V.install.log
  echo "=== JAX $V: installing"
  rm -rf "$VENV"
  if ! { "$PYBIN" -m venv "$VENV" &&
         "$VENV/bin/python" -m pip install --quiet --upgrade pip &&
         "$VENV/bin/python" -m pip install --quiet "jax==$V" "jaxlib==$V" \
           "gast>=0.5.4" "pytest>=7" "pytest-xdist>=3" "hypothesis>=6" "cloudpickle>=2" absl-py &&
         "$VENV/bin/python" -m pip install --quiet --no-deps -e "$REPO"; } > "$INSTALL_LOG" 2>&1; then
    REASON=$(install_error "$INSTALL_LOG")
    echo "    not installable: $REASON"
    row "$V" not-installable - "$PYVER" - - "$INSTALL_LOG" "$REASON"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$VENV"
    continue
  fi
  JAXV=$("$VENV/bin/python" -c 'import jax, jaxlib; print(jax.__version__ + "/" + jaxlib.__version__)' 2>&1 | tail -n 1)
  # autoflow's full self-check of JAX's private API (runtime/jax/selfcheck.py): "all", or
  # the private paths this JAX lacks (autoflow takes the public path there).
  WARN=$("$VENV/bin/python" "$HELPER" selfcheck 2>&1 | tail -n 1 | tr '\t|' '  ' | cut -c1-200)

  echo "=== JAX $V: installed $JAXV, private paths: $WARN; running tests"
  T0=$(date +%s.%N)
  STATUS=0
  # shellcheck disable=SC2086  # TESTS is a list of paths
  # COLUMNS: pytest cuts each FAILED line's reason to the terminal width (80 in a log).
  COLUMNS=200 timeout "$LIMIT" "$VENV/bin/python" -m pytest -q -p no:cacheprovider $TESTS > "$LOG" 2>&1 || STATUS=$?
  WALL=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  case $STATUS in
    0) STATE=passed ;;
    124) STATE=timeout ;;
    *) STATE=failed ;;
  esac
  echo "    $STATE (exit $STATUS) in ${WALL}s: $(tail -n 1 "$LOG")"
  row "$V" "$STATE" "$JAXV" "$PYVER" "$WALL" "$WARN" "$LOG" "pytest exit $STATUS"
  [ "${KEEP:-0}" = 1 ] || rm -rf "$VENV"
done
TOTAL=$((SECONDS - START))

echo
"$PYBIN" "$HELPER" table "$RESULTS" "$OUT" \
  "date=$(date -u '+%Y-%m-%d %H:%M UTC')" \
  "machine=$(uname -m), $(nproc) cores ($(uname -sr))" \
  "python=$PYVER" \
  "commit=$(git rev-parse --short HEAD)" \
  "tests=$TESTS" \
  "total=$TOTAL"
echo
echo "written to $OUT; logs in $WORK/logs"
