#!/usr/bin/env bash
# Installs tinygrad and PyOpenCL (pinned, from PyPI) and numpy into their own virtual environment
# in a cache outside the checkout, and prints the environment's python on its last line. scripts/test.sh
# calls it; the OpenCL shim's tinygrad tests find it through XSCHED_TINYGRAD_PYTHON. A rerun
# finds it in the cache. tinygrad is pure Python (no required dependencies) and reaches OpenCL
# through ctypes (`DEV=CL`): it opens libOpenCL.so.1 by path and looks every function up through
# the handle, which is why it needs the shim as its libOpenCL.so.1 (`xsched run`). PyOpenCL's wheel
# links its own copy of the ICD loader under another name (`libOpenCL-<hash>.so.1`), which only a
# preloaded shim reaches (`xsched run` does both).
set -euo pipefail

VERSION="${TINYGRAD_VERSION:-0.14.0}"
PYOPENCL="2026.1.4"
CACHE_ROOT="${XSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xsched}"
VENV="$CACHE_ROOT/tinygrad-$VERSION-pyopencl-$PYOPENCL"
PY="$VENV/bin/python"

installed() { [ -x "$PY" ] && "$PY" -c "import tinygrad, numpy, pyopencl" >/dev/null 2>&1; }

if ! installed; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q "tinygrad==$VERSION" "pyopencl==$PYOPENCL" "numpy==2.4.6"
  installed || { echo "tinygrad $VERSION / pyopencl $PYOPENCL installed but do not import" >&2; exit 1; }
fi
echo "$PY"
