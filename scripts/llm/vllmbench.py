"""What the scripts that drive vLLM share (vllm-inversion.py, vllm-replay.py): vllm-bench.py's
helpers (vLLM started with its flags, a gateway in front of it), loaded as a module since its
file name has a hyphen, the checkout's root, and the scripts' one quantile."""

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location("vllm_bench", os.path.join(HERE, "vllm-bench.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
# vllm-bench.py put scripts/ on the path for it: scripts/quantile.py's nearest rank.
quantile = bench.quantile
