"""What the scripts that drive llama-server share: gateway-bench.py's helpers (the engine's
command line, readiness, ShareGPT prompts, child processes), loaded as a module since its file
name has a hyphen, the options that name the engine, and starting it."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gateway_bench", ROOT / "scripts/llm/gateway-bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def engine_options(ap, slots=4):
    """--out, --xsched, --slots, --max-prompt-chars, --llama-server and --engine-arg."""
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--xsched", default=str(ROOT / "target/release/xsched"))
    ap.add_argument("--slots", type=int, default=slots)
    ap.add_argument("--max-prompt-chars", type=int, default=1000)
    ap.add_argument("--llama-server", help="the llama-server binary (XSCHED_LLAMA_SERVER)")
    ap.add_argument("--engine-arg", action="append", default=[], dest="engine_args",
                    help="one more llama-server argument, repeated for each "
                         "(--engine-arg=--batch-size --engine-arg=64)")


def start_engine(args, procs, port):
    """One llama-server on `port` (logged under --out, which this creates) among `procs`, up."""
    args.engine = "llama-server"
    args.out.mkdir(parents=True, exist_ok=True)
    procs.start(bench.engine_command(args, port), args.out / "engine.log")
    bench.wait_up(f"http://127.0.0.1:{port}", "llama-server")
