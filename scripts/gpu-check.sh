#!/usr/bin/env bash
# The CUDA checks that need a real NVIDIA GPU (issue 8), as one script for a GPU machine with the
# NVIDIA driver, a CUDA-enabled PyTorch and this repository's dependencies already vendored or
# cached (no network needed). About 6 minutes; every step has a timeout.
#
#   scripts/gpu-check.sh            # results in target/gpu-check/, summary on stdout
#
# 1. the backend's tests on the real driver (XSCHED_CUDA_REAL=1)
# 2. Level-1 vs gated Level-2 preemption latency by command length (example cuda-preempt)
# 3. an unchanged PyTorch foreground (inference, open loop) beside an unchanged PyTorch
#    background (training): standalone, native, and through the shim + `xsched serve`;
#    prints the foreground P99 ratio to standalone and the background throughput.
# Paste the summary into docs/BENCHMARKS.md ("## CUDA (issue 8)") with the GPU it names.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${GPU_CHECK_OUT:-target/gpu-check}"
mkdir -p "$OUT"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-8}"
read -r -a FG_ARGS <<< "${FG_ARGS:---model transformer --requests 300 --period-ms 20}"
step() { printf '\n== %s\n' "$*"; }
die() { echo "gpu-check: $*" >&2; exit 1; }

step "machine"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this script needs an NVIDIA GPU and driver"
GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
[ -n "$GPU" ] || die "nvidia-smi lists no GPU"
echo "GPU: $GPU"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || die "python3 cannot import a CUDA-enabled torch"
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'

step "build (release, offline)"
timeout 300 cargo build --release --offline --locked -p xsched-cli -p xsched-shim-cuda \
  -p xsched-backend-cuda --examples
SHIM="$PWD/target/release/libxsched_cuda.so"
[ -f "$SHIM" ] || die "$SHIM was not built"

step "backend tests on the real driver"
XSCHED_CUDA_REAL=1 timeout 240 cargo test --release --offline --locked -p xsched-backend-cuda \
  --test streams -- --test-threads=1 2>&1 | tee "$OUT/backend-tests.txt" | tail -15

step "preemption latency (Level 1 vs gated Level 2)"
timeout 150 target/release/examples/cuda-preempt samples=40 lengths=100,500,2000 \
  | tee "$OUT/preempt.jsonl"

step "PyTorch: foreground inference beside background training"
SOCK="$(mktemp -u /tmp/xsched-gpu-XXXXXX.sock)"
fg() { timeout 120 python3 scripts/gpu/fg_infer.py "${FG_ARGS[@]}"; }
# Start the background (with any extra environment), wait until it trains, run the foreground,
# stop the background; writes $1-fg.json and $1-bg.json.
beside() {
  local name="$1"; shift
  local bgout="$OUT/$name-bg.json"
  env "$@" XSCHED_PRIORITY=0 timeout 300 python3 scripts/gpu/bg_train.py > "$bgout" &
  local bg=$!
  for _ in $(seq 600); do grep -q started "$bgout" 2>/dev/null && break; sleep 0.1; done
  grep -q started "$bgout" || { kill "$bg" 2>/dev/null; die "background did not start ($name)"; }
  env "$@" XSCHED_PRIORITY=10 timeout 120 python3 scripts/gpu/fg_infer.py "${FG_ARGS[@]}" \
    | tail -1 > "$OUT/$name-fg.json"
  kill -TERM "$bg"; wait "$bg" || true
}
fg | tail -1 > "$OUT/standalone-fg.json"
beside native
target/release/xsched serve --socket "$SOCK" --policy hpf > "$OUT/serve.log" 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true; rm -f "$SOCK"' EXIT
sleep 1
beside shim LD_PRELOAD="$SHIM" XSCHED_SCHEDULER=global XSCHED_SOCKET="$SOCK"

step "summary ($GPU)"
python3 - "$OUT" "$GPU" <<'PY'
import json, sys, pathlib
out, gpu = pathlib.Path(sys.argv[1]), sys.argv[2]
last = lambda p: json.loads((out / p).read_text().strip().splitlines()[-1])
alone = last("standalone-fg.json")["p99_ms"]
print(f"GPU: {gpu}")
print("| mode | fg p50 ms | fg p99 ms | p99 / standalone | bg iters/s |")
print("|---|---|---|---|---|")
print(f"| standalone | {last('standalone-fg.json')['p50_ms']} | {alone} | 1.00 | - |")
for mode in ("native", "shim"):
    fg, bg = last(f"{mode}-fg.json"), last(f"{mode}-bg.json")
    label = "xsched (shim + daemon, hpf)" if mode == "shim" else "native"
    print(f"| {label} | {fg['p50_ms']} | {fg['p99_ms']} | {fg['p99_ms'] / alone:.2f} | {bg.get('iters_per_s', '-')} |")
print()
print("| level | cmd us | fg alone us | preempt p50 us | preempt p99 us |")
print("|---|---|---|---|---|")
for line in (out / "preempt.jsonl").read_text().splitlines():
    r = json.loads(line)
    print(f"| {r['level']} | {r['cmd_us']} | {r['fg_alone_us']} | {r['p50_us']} | {r['p99_us']} |")
PY
