#!/usr/bin/env bash
# Build a wheel from the checkout, install it (not editable) into a fresh virtual
# environment and use it from a folder outside the checkout: convert and run
# examples/collatz.py, `autoflow convert` a file, and the pytest plugin on a tiny
# test. Catches what an editable install hides: a file missing from the package
# data (py.typed), an import of a test helper, an entry point that needs the source tree.
# Usage: .ci/wheel_smoke.sh [PYTHON]   (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=${1:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$repo"
wheel=$(ls "$work"/dist/autoflow-*.whl)
echo "built $(basename "$wheel")"
# (The listing is read whole first: `grep -q` in a pipe would stop reading early, and
# under `pipefail` the writer's broken pipe would fail the check.)
listing=$("$py" -m zipfile -l "$wheel")
grep -q 'autoflow/py.typed' <<<"$listing" || { echo "error: py.typed missing from the wheel" >&2; exit 1; }
if "$py" -m zipfile -l "$wheel" | grep -E '^(tests|examples|benchmarks)/' ; then
  echo "error: the wheel holds files outside the autoflow package" >&2; exit 1
fi

"$py" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel" "pytest>=7" mypy

mkdir "$work/use"
cp examples/collatz.py .ci/typed_usage.py "$work/use/"
cd "$work/use"
export PYTHONPATH= AUTOFLOW_STRICT=1
bin="$work/venv/bin"

# The installed package, not the checkout, with its type marker.
"$bin/python" - "$repo" <<'PY'
import pathlib, sys
import autoflow
where = pathlib.Path(autoflow.__file__).resolve().parent
assert not str(where).startswith(str(pathlib.Path(sys.argv[1]).resolve())), where
assert (where / "py.typed").is_file(), "no py.typed"
print("autoflow", autoflow.__version__, "from", where)
PY

# Convert and run an example.
"$bin/python" collatz.py | tee run.txt
grep -q '^OK$' run.txt

# The command line, on a file (parses only, never runs it).
"$bin/autoflow" convert collatz.py > converted.py
grep -q 'while_stmt' converted.py
"$bin/python" -c "import ast; ast.parse(open('converted.py').read())"
one=$("$bin/python" -m autoflow convert collatz.py --function collatz_steps)
grep -q 'if_stmt' <<<"$one"
echo "autoflow convert: ok"

# The pytest plugin (entry point pytest11), on a tiny project with a golden file.
mkdir -p proj/golden
cat > proj/golden/step.py <<'PY'
def step(x):
    if x > 0:
        x = x * 2.0
    else:
        x = -x
    return x
PY
cat > proj/test_step.py <<'PY'
def test_step(autoflow_golden):
    autoflow_golden.check_conversion("golden/step.py")
    autoflow_golden.check_behaviour("golden/step.py", {"step": [(1.0,), (-2.0,)]})
PY
(cd proj && "$bin/python" -m pytest -q -p no:cacheprovider --autoflow-update && test -f golden/step.after.py \
   && "$bin/python" -m pytest -q -p no:cacheprovider)

# Types: user code checks against the installed package's annotations (py.typed); the
# public modules' own annotations are checked with the lint, first in .ci/run.
"$bin/python" -m mypy --strict --no-incremental typed_usage.py
"$bin/python" typed_usage.py > /dev/null
echo "wheel smoke test: ok"
