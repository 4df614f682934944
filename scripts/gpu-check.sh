#!/usr/bin/env bash
# The CUDA checks that need a real NVIDIA GPU, in two steps, because the GPU machine starts bare
# (no Rust toolchain, no crate cache, no network; a CUDA image with python3 + PyTorch):
#
#   scripts/gpu-check.sh prepare [STAGE]   # here: build everything and stage it in STAGE
#                                          # (default target/gpu-stage, at most 64 MiB)
#   bash STAGE/gpu-check.sh run STAGE      # there: uses only STAGE and the machine's own
#                                          # python3/torch; results in $OUT (default STAGE/out)
#   scripts/gpu-check.sh dry-run [STAGE]   # here: prepare, then run against the tests' fake
#                                          # driver (no GPU, no torch: PyTorch steps skipped)
#
# The run step: every step has a timeout, 7.8 minutes in all at worst (150 + 30 s tests, 90 s
# preemption, 3 x 45 s foreground and 2 x 30 s background start-up):
# 1. the machine: GPU, driver, torch, and that this machine's glibc is at least the newest
#    symbol version the staged binaries need (they are built here against an older glibc, and
#    glibc is backward compatible, so a newer one runs them);
# 2. the CUDA backend's tests on the real driver (XSCHED_CUDA_REAL=1), from their staged
#    executables (streams, and refill: the watcher running the XQueue's completion hook);
# 3. Level-1 vs gated Level-2 preemption latency by command length (example cuda-preempt);
# 4. an unchanged PyTorch foreground (inference, open loop) beside an unchanged PyTorch
#    background (training): standalone, native, and through the shim + `xsched serve`.
# Paste the summary into docs/BENCHMARKS.md ("## CUDA (issue 8)") with the GPU it names.
set -euo pipefail
LIMIT_BYTES=$((64 * 1024 * 1024))
step() { printf '\n== %s\n' "$*"; }
die() { echo "gpu-check: $*" >&2; exit 1; }

# The newest GLIBC_x.y symbol version any staged binary needs.
glibc_needed() {
  objdump -T "$1"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | cut -d_ -f2
}

prepare() {
  local stage="$1" root
  root="$(cd "$(dirname "$0")/.." && pwd)"
  cd "$root"
  export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
  step "build (release)"
  cargo build --release --locked -p xsched-cli -p xsched-shim-cuda
  cargo build --release --locked -p xsched-backend-cuda --examples
  local tests
  tests="$(cargo test --release --locked -p xsched-backend-cuda --test streams --test refill \
    --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("streams", "refill"):
        print(m["target"]["name"], m["executable"])')"
  [ "$(wc -l <<< "$tests")" = 2 ] || die "the backend's test executables were not built"
  step "stage into $stage"
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/gpu" "$stage/fake"
  cp target/release/xsched target/release/libxsched_cuda.so \
    target/release/examples/cuda-preempt "$stage/bin/"
  while read -r name exe; do cp "$exe" "$stage/bin/cuda-$name-tests"; done <<< "$tests"
  # Debug info is most of their size and none of the check needs it.
  strip --strip-debug "$stage"/bin/*
  cp scripts/gpu/*.py "$stage/gpu/"
  cp crates/backend-cuda/tests/fake/libcuda.c "$stage/fake/"
  cp scripts/gpu-check.sh "$stage/"
  local size
  size="$(du -sb "$stage" | cut -f1)"
  echo "staged $(du -sh "$stage" | cut -f1): $(ls "$stage/bin" | tr '\n' ' ')"
  echo "newest glibc symbol needed: $(glibc_needed "$stage") (this machine: $(ldd --version | head -1 | grep -o '[0-9.]*$'))"
  [ "$size" -le "$LIMIT_BYTES" ] || die "the stage is $size bytes, over the device tool's 64 MiB"
}

run() {
  local stage fake="${GPU_CHECK_FAKE:-0}"
  stage="$(cd "$1" && pwd)"
  local out="${OUT:-$stage/out}" bin="$stage/bin"
  mkdir -p "$out"
  read -r -a FG_ARGS <<< "${FG_ARGS:---model transformer --requests 300 --period-ms 20}"

  step "machine"
  local have need
  have="$(ldd --version | head -1 | grep -o '[0-9.]*$')"
  need="$(glibc_needed "$stage" || true)"
  echo "glibc: $have here, $need needed by the staged binaries"
  if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    die "this glibc ($have) is older than the staged binaries need ($need)"
  fi
  local gpu torch=1 real=1
  if [ "$fake" = 1 ]; then
    real=0 torch=0
    cc -shared -fPIC -O2 -Wl,-soname,libcuda.so -o "$stage/fake/libcuda.so" \
      "$stage/fake/libcuda.c" -lpthread
    ln -sf libcuda.so "$stage/fake/libcuda.so.1"
    export LD_LIBRARY_PATH="$stage/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    gpu="fake driver (dry run: timings say nothing about a GPU)"
  else
    command -v nvidia-smi >/dev/null || die "nvidia-smi not found: the run step needs an NVIDIA GPU"
    gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
    [ -n "$gpu" ] || die "nvidia-smi lists no GPU"
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
      || die "python3 cannot import a CUDA-enabled torch"
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  fi
  echo "GPU: $gpu"

  step "backend tests on the $([ "$real" = 1 ] && echo real || echo fake) driver"
  local real_env=()
  [ "$real" = 1 ] && real_env=(XSCHED_CUDA_REAL=1)
  local t limit
  for t in streams refill; do
    limit=150
    [ "$t" = refill ] && limit=30
    env "${real_env[@]}" timeout "$limit" "$bin/cuda-$t-tests" --test-threads=1 2>&1 \
      | tee "$out/backend-$t-tests.txt" | tail -15
    grep -q "test result: ok" "$out/backend-$t-tests.txt" || die "the backend's $t tests failed"
  done

  step "preemption latency (Level 1 vs gated Level 2)"
  timeout 90 "$bin/cuda-preempt" samples=40 lengths=100,500,2000 | tee "$out/preempt.jsonl"
  [ -s "$out/preempt.jsonl" ] || die "cuda-preempt printed nothing"

  if [ "$torch" = 1 ]; then
    step "PyTorch: foreground inference beside background training"
    torch_pair "$stage" "$out"
  else
    step "PyTorch: skipped (dry run: no GPU for torch)"
  fi

  step "summary ($gpu)"
  python3 - "$out" "$gpu" "$torch" <<'PY'
import json, sys, pathlib
out, gpu, torch = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
last = lambda p: json.loads((out / p).read_text().strip().splitlines()[-1])
print(f"GPU: {gpu}")
if torch:
    alone = last("standalone-fg.json")["p99_ms"]
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
}

# The unchanged PyTorch pair: standalone, native, and through the shim + daemon.
torch_pair() {
  local stage="$1" out="$2" sock
  sock="$(mktemp -u /tmp/xsched-gpu-XXXXXX.sock)"
  # Start the background (with any extra environment), wait until it trains, run the
  # foreground, stop the background; writes $1-fg.json and $1-bg.json.
  beside() {
    local name="$1"; shift
    local bgout="$out/$name-bg.json"
    env "$@" XSCHED_PRIORITY=0 timeout 90 python3 "$stage/gpu/bg_train.py" > "$bgout" &
    local bg=$!
    for _ in $(seq 300); do grep -q started "$bgout" 2>/dev/null && break; sleep 0.1; done
    grep -q started "$bgout" || { kill "$bg" 2>/dev/null; die "background did not start ($name)"; }
    env "$@" XSCHED_PRIORITY=10 timeout 45 python3 "$stage/gpu/fg_infer.py" "${FG_ARGS[@]}" \
      | tail -1 > "$out/$name-fg.json"
    kill -TERM "$bg"; wait "$bg" || true
  }
  timeout 45 python3 "$stage/gpu/fg_infer.py" "${FG_ARGS[@]}" | tail -1 > "$out/standalone-fg.json"
  beside native
  "$stage/bin/xsched" serve --socket "$sock" --policy hpf > "$out/serve.log" 2>&1 &
  local serve=$!
  trap "kill $serve 2>/dev/null || true; rm -f '$sock'" EXIT
  sleep 1
  beside shim LD_PRELOAD="$stage/bin/libxsched_cuda.so" XSCHED_SCHEDULER=global XSCHED_SOCKET="$sock"
}

case "${1:-}" in
  prepare) prepare "$(realpath -m "${2:-target/gpu-stage}")" ;;
  run) [ -n "${2:-}" ] || die "usage: gpu-check.sh run STAGE"; run "$2" ;;
  dry-run)
    stage="$(realpath -m "${2:-target/gpu-stage}")"
    prepare "$stage"
    GPU_CHECK_FAKE=1 run "$stage" ;;
  *) die "usage: gpu-check.sh prepare [STAGE] | run STAGE | dry-run [STAGE]" ;;
esac
