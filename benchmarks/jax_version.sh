#!/usr/bin/env bash
# The whole test suite on a JAX other than CI's, from an installed copy of it.
#
# CI installs the newest JAX the package registry has (0.10.2 here) and runs JAX 0.4.38
# on the core tests. A newer JAX may exist elsewhere before the registry has it; JAX 0.11.2
# was checked this way, with the `jax` and `jaxlib` folders of a GPU machine's image (whose
# jaxlib holds the CPU backend; its CUDA plugins were not needed):
#
#   SITE=/path/to/site-packages PY=python3.12 bash benchmarks/jax_version.sh
#
# SITE holds jax/, jaxlib/ and their .dist-info folders; PY is a Python their jaxlib was
# built for. The rest (numpy, scipy, ml_dtypes, the test extra) comes from the registry:
# pip keeps the copied JAX, which satisfies every "jax>=" requirement.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SITE:?set SITE to a site-packages folder holding jax and jaxlib}"
PY=${PY:-python3}
VENV=${VENV:-/tmp/autoflow-jax-version}
rm -rf "$VENV"
"$PY" -m venv "$VENV"
TARGET=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp -r "$SITE"/jax "$SITE"/jax-*.dist-info "$SITE"/jaxlib "$SITE"/jaxlib-*.dist-info "$TARGET"/
"$VENV/bin/python" -m pip install --quiet numpy scipy ml_dtypes opt_einsum
"$VENV/bin/python" -m pip install --quiet -e '.[test]'
"$VENV/bin/python" -c "import jax; print('jax', jax.__version__, jax.devices())"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
