#!/usr/bin/env bash
# The CUDA checks that need a real NVIDIA GPU, in two steps, because the GPU machine starts bare
# (no Rust toolchain, no crate cache, no network; a CUDA image with nvcc, python3 + PyTorch):
#
#   scripts/gpu-check.sh prepare [STAGE]   # here: build everything and stage it in STAGE
#                                          # (default target/gpu-stage, at most 64 MiB)
#   bash STAGE/gpu-check.sh run STAGE      # there: uses only STAGE and the machine's own
#                                          # nvcc/python3/torch; results in STAGE/out, and,
#                                          # where $OUT is set, packed into $OUT/gpu-check.tgz
#                                          # with the log's summary in $OUT/summary.md
#   scripts/gpu-check.sh dry-run [STAGE]   # here: prepare, then run against the tests' fake
#                                          # driver (no GPU, no nvcc, no torch: those skipped)
#
# The run step (about 3 minutes when all is well; every process is bounded, 8 minutes at worst
# before stacks, each overrun adding up to a minute for its stacks; give the device call 10
# minutes and `timeout 560` around the run, which still kills what it started and packs what it
# has):
# 1. the machine: GPU, driver, torch, and that this machine's glibc is at least the newest
#    symbol version the staged binaries need (they are built here against an older glibc, and
#    glibc is backward compatible, so a newer one runs them);
# 2. the CUDA backend's tests on the real driver (XSCHED_CUDA_REAL=1), from their staged
#    executables (streams, and refill: the watcher running the XQueue's completion hook);
# 3. Level-1 vs gated Level-2 preemption latency by command length (example cuda-preempt);
# 4. a plain CUDA runtime program (gpu/cudart_probe.cu, built there with nvcc) natively, under
#    the shim with the in-process scheduler, under the shim with `xsched serve`, and under the
#    shim in-process with CUDA_LAUNCH_BLOCKING=1 (every launch blocks until it ran: the
#    stream watcher's backstop must let each through its own gate);
# 5. an unchanged PyTorch foreground (inference, open loop): standalone, beside an unchanged
#    PyTorch background (training) natively, alone under the shim, and beside the background
#    with both under the shim + `xsched serve`.
# A process that overruns its bound has its stacks saved before it is killed (Python's through
# faulthandler on SIGUSR1, native ones through cuda-gdb where the machine has it) in
# out/NAME-stacks.txt. A failed check does not stop the run: the next ones still run, and the
# run exits 1 naming each failure. Paste the summary into docs/results/gpu-runs.md with the GPU
# it names.
set -euo pipefail
LIMIT_BYTES=$((64 * 1024 * 1024))
step() { printf '\n== %s\n' "$*"; }
die() { echo "gpu-check: $*" >&2; exit 1; }
# A failed check in the run step is recorded and the next one still runs: a GPU is lent for
# minutes, so one run must bring back every result it can. The run exits 1 if any failed.
# Messages go to fd 3, the run's log, also from inside a call whose stderr is a result file.
FAILED=()
fail() { echo "gpu-check: FAILED: $*" >&3; FAILED+=("$*"); }

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
  cp scripts/gpu/*.py scripts/gpu/*.cu "$stage/gpu/"
  cp scripts/quantile.py "$stage/"  # fg_infer.py's quantile, where it is in scripts/
  cp crates/backend-cuda/tests/fake/libcuda.c "$stage/fake/"
  cp scripts/gpu-check.sh "$stage/"
  local size
  size="$(du -sb "$stage" | cut -f1)"
  echo "staged $(du -sh "$stage" | cut -f1): $(ls "$stage/bin" | tr '\n' ' ')"
  echo "newest glibc symbol needed: $(glibc_needed "$stage") (this machine: $(ldd --version | sed -n 1p | grep -o '[0-9.]*$'))"
  [ "$size" -le "$LIMIT_BYTES" ] || die "the stage is $size bytes, over the device tool's 64 MiB"
}

run() {
  local stage fake="${GPU_CHECK_FAKE:-0}"
  stage="$(cd "$1" && pwd)"
  RESULTS="$stage/out"
  BIN="$stage/bin"
  rm -rf "$RESULTS"
  mkdir -p "$RESULTS"
  trap 'reap; [ -z "${OUT:-}" ] || pack' EXIT
  trap 'exit 143' TERM
  local rc=0
  { run_checks "$stage" "$fake" 3>&1 2>&1; } | tee "$RESULTS/log.txt" || rc=$?
  return "$rc"
}

# Kill every process group the run started (listed in $RESULTS/pgids as they start), and
# the daemon: none outlives the run, also when a timeout outside stops it.
reap() {
  local pgid
  while read -r pgid; do kill -KILL -- "-$pgid" 2>/dev/null || true; done \
    < "$RESULTS/pgids" 2>/dev/null || true
}

# Where the device tool's $OUT is set: the results as one archive and the summary beside it
# (the tool brings back at most 8 files).
pack() {
  tar czf "$OUT/gpu-check.tgz" -C "$RESULTS" . || true
  sed -n '/^== summary/,$p' "$RESULTS/log.txt" > "$OUT/summary.md" 2>/dev/null || true
}

run_checks() {
  local stage="$1" fake="$2"
  read -r -a FG_ARGS <<< "${FG_ARGS:---model transformer --requests 300 --period-ms 20}"

  step "machine"
  local have need
  have="$(ldd --version | sed -n 1p | grep -o '[0-9.]*$')"
  need="$(glibc_needed "$stage" || true)"
  echo "glibc: $have here, $need needed by the staged binaries"
  if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | sed -n 1p)" != "$need" ]; then
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
    gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed -n 1p)"
    [ -n "$gpu" ] || die "nvidia-smi lists no GPU"
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
      || die "python3 cannot import a CUDA-enabled torch"
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  fi
  echo "GPU: $gpu"

  step "backend tests on the $([ "$real" = 1 ] && echo real || echo fake) driver"
  local real_env=() t
  [ "$real" = 1 ] && real_env=(XSCHED_CUDA_REAL=1)
  for t in streams refill; do
    bounded "backend-$t-tests" 30 env "${real_env[@]}" "$BIN/cuda-$t-tests" --test-threads=1 \
      > "$RESULTS/backend-$t-tests.txt" 2>&1 || true
    tail -15 "$RESULTS/backend-$t-tests.txt"
    grep -q "test result: ok" "$RESULTS/backend-$t-tests.txt" || fail "the backend's $t tests"
  done

  step "preemption latency (Level 1 vs gated Level 2)"
  bounded cuda-preempt 60 "$BIN/cuda-preempt" samples=40 lengths=100,500,2000 \
    > "$RESULTS/preempt.jsonl" || true
  cat "$RESULTS/preempt.jsonl"
  [ -s "$RESULTS/preempt.jsonl" ] || fail "cuda-preempt printed nothing"

  local sock
  sock="$(mktemp -u /tmp/xsched-gpu-XXXXXX.sock)"
  XSCHED_LOG=info setsid "$BIN/xsched" serve --socket "$sock" --policy hpf \
    > "$RESULTS/serve.log" 2>&1 &
  SERVE=$!
  echo "$SERVE" >> "$RESULTS/pgids"
  sleep 1
  kill -0 "$SERVE" 2>/dev/null || fail "xsched serve did not start (serve.log)"
  SHIM_LOCAL=(LD_PRELOAD="$BIN/libxsched_cuda.so" XSCHED_SCHEDULER=local XSCHED_LOG=info)
  SHIM_GLOBAL=(LD_PRELOAD="$BIN/libxsched_cuda.so" XSCHED_SCHEDULER=global
    XSCHED_SOCKET="$sock" XSCHED_LOG=info)

  if command -v nvcc >/dev/null; then
    step "a plain CUDA runtime program: native, under the shim, under the shim + daemon"
    cudart_probe "$stage"
  else
    step "CUDA runtime program: skipped (no nvcc on this machine)"
  fi

  if [ "$torch" = 1 ]; then
    step "PyTorch: foreground inference beside background training"
    torch_pair "$stage"
  else
    step "PyTorch: skipped (dry run: no GPU for torch)"
  fi
  kill "$SERVE" 2>/dev/null || true
  wait "$SERVE" 2>/dev/null || true
  rm -f "$sock"

  step "summary ($gpu)"
  python3 "$stage/gpu/summary.py" "$RESULTS" "$gpu" "$torch" || fail "the summary"
  if [ "${#FAILED[@]}" -gt 0 ]; then
    printf 'gpu-check: %d check(s) failed:\n' "${#FAILED[@]}"
    printf '  - %s\n' "${FAILED[@]}"
    return 1
  fi
}

# Run "$@" (a command, not a pipeline; redirect the call) for at most $2 seconds; step $1.
# Returns its status, or 124 when it overran (its stacks saved, then its process group killed).
bounded() {
  local name="$1" secs="$2"
  shift 2
  setsid "$@" &
  echo "$!" >> "$RESULTS/pgids"
  finish "$name" "$!" "$secs"
}

# Wait up to $3 seconds for process $2 (step $1, started by setsid: its own process group) to
# end. If it has not: save its stacks in $RESULTS/$1-stacks.txt, kill its process group (no
# child left holding the log's pipe), record the failure, return 124. Else its status.
finish() {
  local name="$1" pid="$2" ticks=$(($3 * 10))
  while kill -0 "$pid" 2>/dev/null && [ "$ticks" -gt 0 ]; do
    sleep 0.1
    ticks=$((ticks - 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    stacks "$name" "$pid"
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    fail "$name did not finish within $3 s (stacks in $name-stacks.txt)"
    return 124
  fi
  wait "$pid"
}

# The stacks of a process that overran: Python's (the scripts in gpu/ dump them to their stderr
# on SIGUSR1; only they are sent it) and every thread's native stack through cuda-gdb.
stacks() {
  local name="$1" pid="$2" file="$RESULTS/$1-stacks.txt"
  echo "== $name (pid $pid): $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" > "$file"
  # SIGUSR1 only once faulthandler catches it (bit 10 of SigCgt): before that it would kill.
  local caught
  caught="$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)"
  if [ -n "$caught" ] && (( (16#$caught >> 9) & 1 )); then
    kill -USR1 "$pid" 2>/dev/null && sleep 1
  fi
  # Each thread's kernel side, which needs no debugger: its name, wait channel and system call.
  local task
  for task in /proc/"$pid"/task/*; do
    echo "thread $(cat "$task/comm" 2>/dev/null): wchan $(cat "$task/wchan" 2>/dev/null)," \
      "syscall $(cut -d' ' -f1 "$task/syscall" 2>/dev/null)" >> "$file"
  done
  if command -v cuda-gdb >/dev/null; then
    timeout -k 5 60 cuda-gdb -q -p "$pid" -batch -ex 'thread apply all bt' >> "$file" 2>&1 || true
  else
    echo "(no cuda-gdb here: no native stacks)" >> "$file"
  fi
}

# The CUDA runtime program, built here with nvcc against the shared runtime (as PyTorch uses
# it), natively, under the shim in-process, and under the shim with the daemon.
cudart_probe() {
  local stage="$1" exe="$RESULTS/cudart-probe" mode
  if ! bounded nvcc 60 nvcc -O2 -cudart shared -o "$exe" "$stage/gpu/cudart_probe.cu" \
    > "$RESULTS/nvcc.txt" 2>&1; then
    cat "$RESULTS/nvcc.txt"
    fail "nvcc could not build the CUDA runtime program"
    return 0
  fi
  for mode in native shim-local shim-global shim-blocking; do
    local envs=()
    [ "$mode" = shim-local ] && envs=("${SHIM_LOCAL[@]}")
    [ "$mode" = shim-global ] && envs=("${SHIM_GLOBAL[@]}")
    [ "$mode" = shim-blocking ] && envs=("${SHIM_LOCAL[@]}" CUDA_LAUNCH_BLOCKING=1)
    bounded "cudart-$mode" 20 env "${envs[@]}" "$exe" \
      > "$RESULTS/cudart-$mode.txt" 2> "$RESULTS/cudart-$mode.err" || true
    echo "$mode: $(cat "$RESULTS/cudart-$mode.txt") (last step: $(tail -1 "$RESULTS/cudart-$mode.err"))"
    grep -q '^cudart-probe ok' "$RESULTS/cudart-$mode.txt" || fail "the CUDA runtime program ($mode)"
  done
}

# The unchanged PyTorch programs: the foreground standalone; beside the background natively;
# the foreground alone under the shim (in-process scheduler); both under the shim + daemon.
torch_pair() {
  local stage="$1"
  foreground standalone
  beside native
  foreground shim-local "${SHIM_LOCAL[@]}"
  beside shim "${SHIM_GLOBAL[@]}"
}

# The foreground (step $1, environment "${@:2}") for at most 40 s: $RESULTS/$1-fg.json.
foreground() {
  local name="$1"
  shift
  bounded "$name-fg" 40 env "$@" XSCHED_PRIORITY=10 python3 "$stage/gpu/fg_infer.py" \
    "${FG_ARGS[@]}" > "$RESULTS/$name-fg.json" 2> "$RESULTS/$name-fg.err" || true
  [ -s "$RESULTS/$name-fg.json" ] || fail "the foreground printed no result ($name; $name-fg.err)"
}

# The background (environment "${@:2}") training; once it trains, the foreground beside it;
# then the background stopped: $RESULTS/$1-fg.json and $1-bg.json.
beside() {
  local name="$1"
  shift
  local bgout="$RESULTS/$name-bg.json"
  setsid env "$@" XSCHED_PRIORITY=0 python3 "$stage/gpu/bg_train.py" > "$bgout" \
    2> "$RESULTS/$name-bg.err" &
  local bg=$! ticks=300
  echo "$bg" >> "$RESULTS/pgids"
  while ! grep -q started "$bgout" 2>/dev/null && kill -0 "$bg" 2>/dev/null && [ "$ticks" -gt 0 ]; do
    sleep 0.1
    ticks=$((ticks - 1))
  done
  if grep -q started "$bgout"; then
    foreground "$name" "$@"
  else
    fail "the background did not start within 30 s ($name; $name-bg.err)"
    # Stacks while it still hangs: a TERM could end it before finish looks.
    if kill -0 "$bg" 2>/dev/null; then stacks "$name-bg" "$bg"; fi
  fi
  kill -TERM "$bg" 2>/dev/null || true
  finish "$name-bg" "$bg" 15 || true
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
