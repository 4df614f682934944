//! `xsched llm serve` in front of a real continuous-batching engine no one here wrote:
//! llama.cpp's C++ `llama-server` (4 parallel slots) serving SmolLM2-135M-Instruct, driven by
//! the official `openai` Python client (see `engines`).
//!
//! - Through every policy the gateway runs, a deterministic request (temperature 0, a fixed
//!   seed), streamed and not, gets the engine's own answer, and the SageSched gateway learns
//!   from both.
//! - 500 streamed requests in bursts of 25 through a SageSched gateway admitting 4 at a time:
//!   none fails (the client never retries), and `max_completion_tokens` bounds the answers sent
//!   with it.

mod engines;

use engines::{client, engine_or_skip, gateway, get, llama_server};
use std::time::{Duration, Instant};

/// Every policy `xsched llm serve` runs for any client (the oracles need each request to state
/// its length; the rest order by noisy truths or pause running requests; `trail` and
/// `fastserve` run their order without pausing).
const POLICIES: [&str; 11] = [
    "fcfs",
    "priority",
    "sagesched",
    "sagesched-time",
    "sagesched-quanta",
    "sagesched-length",
    "sagesched-nohistory",
    "sagesched-noaging",
    "ssjf",
    "trail:preempt=off",
    "fastserve:preempt=off",
];

#[test]
fn the_openai_client_gets_the_engines_answer_through_every_policy_streamed_and_not() {
    let Some((server, model)) = engine_or_skip() else {
        return;
    };
    let (_engine, engine_port) = llama_server(&server, &model, 4);
    let engine_url = format!("http://127.0.0.1:{engine_port}/v1");
    // The first generation fills the engine's prompt cache: compare like with like.
    let _warm = client("openai_check.py", &[&engine_url]);
    let direct = client("openai_check.py", &[&engine_url]);
    assert!(
        direct["content"].as_str().is_some_and(|c| !c.is_empty()),
        "the engine answered: {direct}"
    );
    assert!(direct["chunks"].as_u64() > Some(1), "it streamed: {direct}");
    for policy in POLICIES {
        let (mut g, port) = gateway(
            engine_port,
            &[
                "--concurrency",
                "4",
                "--policy",
                policy,
                "--router",
                "cost-aware",
            ],
        );
        let through = client("openai_check.py", &[&format!("http://127.0.0.1:{port}/v1")]);
        assert_eq!(
            through, direct,
            "the same deterministic answers through {policy}"
        );
        if policy == "sagesched" {
            // It learned from both answers: the complete one's usage and the stream's counted
            // events (on a blocking thread after each answer: allow it a moment).
            let learned = "xsched_gateway_predictor_abs_error_tokens_count{policy=\"sagesched\"} 2";
            let start = Instant::now();
            loop {
                let metrics = get(port, "/metrics").unwrap_or_default();
                if metrics.contains(learned) {
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "{learned} in {metrics}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        assert!(
            g.0.try_wait().is_ok_and(|s| s.is_none()),
            "{policy}'s gateway still serves"
        );
    }
}

#[test]
fn five_hundred_streamed_requests_in_bursts_lose_no_answer() {
    let Some((server, model)) = engine_or_skip() else {
        return;
    };
    let (_engine, engine_port) = llama_server(&server, &model, 4);
    let (mut g, port) = gateway(
        engine_port,
        &["--concurrency", "4", "--policy", "sagesched"],
    );
    let report = client(
        "burst_check.py",
        &[
            &format!("http://127.0.0.1:{port}/v1"),
            "--total",
            "500",
            "--burst",
            "25",
            // Short answers: more connections end per second (the race this test is for), and
            // the test stays well inside its time limit on a busy 2-core runner.
            "--max-tokens",
            "8",
        ],
    );
    eprintln!("{report}");
    assert_eq!(report["sent"], 500, "{report}");
    assert_eq!(report["answered"], 500, "no answer lost: {report}");
    assert_eq!(report["capped_requests"], 50, "{report}");
    assert!(
        report["capped_max_completion_tokens"]
            .as_u64()
            .is_some_and(|t| t <= report["cap"].as_u64().unwrap_or(0)),
        "max_completion_tokens honoured: {report}"
    );
    let metrics = get(port, "/metrics").unwrap_or_default();
    let count = |class: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with("xsched_gateway_answers_total") && l.contains(class))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    // (2xx also counts the readiness probes' `GET /v1/models`.)
    assert!(count("\"2xx\"") >= Some(500), "{metrics}");
    for class in ["\"4xx\"", "\"429\"", "\"5xx\""] {
        assert_eq!(count(class), Some(0), "{class}: {metrics}");
    }
    assert!(
        g.0.try_wait().is_ok_and(|s| s.is_none()),
        "the gateway still serves"
    );
}
