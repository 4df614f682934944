#!/usr/bin/env bash
# Checks that two builds of the CLI simulate the same bytes: every scenarios/*.toml as JSON
# (all but its `checks`, whose verdict wording may change on purpose: `--with-checks` compares
# them too), the simulated demo on gv100 likewise, the simulated profiles that `xsched devices --json`
# lists, and the LLM simulator (`xsched llm`: every policy of the operating-range sweep on two
# presets, three arrival shapes and three loads, on the arena-hard and alpaca-eval prompt sets,
# less its wall-clock fields). Refactors of the simulators (profiles, scenario parsing, the LLM
# core) must not change a number; they are deterministic, so any difference is a real one.
#
#   scripts/sim-identical.sh [--with-checks] BEFORE_BIN AFTER_BIN [OUT_DIR]
#
# BEFORE_BIN and AFTER_BIN are `xsched` binaries (build each with
# `cargo build --release -p xsched-cli` and copy target/release/xsched aside). Outputs go to
# OUT_DIR/before and OUT_DIR/after (default: a fresh temporary directory, kept for inspection).
# Exits 0 when identical, 1 with the differences otherwise.
set -euo pipefail
filter='del(.checks)'
if [ "${1:-}" = "--with-checks" ]; then
  filter='.'
  shift
fi
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
before=$(realpath "$1")
after=$(realpath "$2")
out=${3:-$(mktemp -d)}
cd "$(dirname "$0")/.."
command -v jq >/dev/null || { echo "jq is needed to pick the simulated profiles" >&2; exit 2; }

snapshot() { # BIN DIR
  local bin=$1 dir=$2
  rm -rf "$dir" && mkdir -p "$dir"
  for s in scenarios/*.toml; do
    "$bin" sim "$s" --json | jq "$filter" >"$dir/$(basename "$s" .toml).json"
  done
  "$bin" demo --device gv100 --json | jq "$filter" >"$dir/demo-gv100.json"
  # Real backends depend on the machine; only the simulated profiles are compared.
  "$bin" devices --json | jq '[.[] | select(.backend == "sim")]' >"$dir/devices-sim.json"
  llm_snapshot "$bin" "$dir"
}

# The LLM simulator's runs, less what the machine's clock measured (the scheduler's and the
# predictor's wall time).
LLM_POLICIES="fcfs,sagesched,srpt-oracle,sagesched:admit=engine,sagesched-quanta,fastserve"
LLM_POLICIES="$LLM_POLICIES,fastserve:preempt=off,fastserve:admit=peak,ssjf,ssjf:admit=peak"
LLM_POLICIES="$LLM_POLICIES,trail,trail:admit=peak"
LLM_CLOCK='walk(if type == "object" then with_entries(select(.key | test("^(sched|predict)_.*_us$") | not)) else . end)'
llm_snapshot() { # BIN DIR
  local bin=$1 dir=$2 set model engine arrivals
  for set in arena-hard:gpt-4 alpaca-eval:Meta-Llama-3-8B-Instruct; do
    model=${set#*:}
    for engine in llama3.1-8b-a100 qwen3-32b-h800; do
      for arrivals in poisson azure-conv azure-code; do
        "$bin" llm --dataset "${set%%:*}" --model-filter "$model" --policy "$LLM_POLICIES" \
          --embedding hashed --engine "$engine" --arrivals "$arrivals" --load 0.5,0.8,1.0 --json \
          2>/dev/null | jq -S "$LLM_CLOCK" >"$dir/llm-${set%%:*}-$engine-$arrivals.json"
      done
    done
  done
}

snapshot "$before" "$out/before"
snapshot "$after" "$out/after"
if diff -r "$out/before" "$out/after"; then
  echo "identical: $(ls "$out/before" | wc -l) outputs in $out/{before,after}"
else
  echo "DIFFERENT (outputs in $out/{before,after})" >&2
  exit 1
fi
