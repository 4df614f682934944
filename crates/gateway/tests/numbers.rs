//! `--order-at engine` against engines written for it: every request goes to the engine at
//! once (past `--concurrency`) with the core's number in `priority`, a client's own `priority`
//! replaced; an engine that refuses numbers gets the request again without one and is ordered
//! in the gateway's queue from then; an engine's own 400 reaches the client and frees the slot.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use xsched_gateway::GatewayConfig;
use xsched_llm_core::EngineOrder;

mod support;
use support::*;

const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";

/// An answer of `status` with the JSON error `message`.
fn error(status: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {"message": message}}).to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// An engine that records each request's body and answers it with what `answer` returns for
/// it, after `hold`.
fn recording<F>(
    rt: &tokio::runtime::Runtime,
    hold: Duration,
    answer: F,
) -> (SocketAddr, Arc<Mutex<Vec<serde_json::Value>>>)
where
    F: Fn(&serde_json::Value) -> Vec<u8> + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s2, answer) = (seen.clone(), Arc::new(answer));
    let addr = raw_engine(rt, move |mut s| {
        let (seen, answer) = (s2.clone(), answer.clone());
        async move {
            while let Some(body) = read_request(&mut s).await {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                seen.lock().expect("seen").push(v.clone());
                tokio::time::sleep(hold).await;
                if s.write_all(&answer(&v)).await.is_err() {
                    return;
                }
            }
        }
    });
    (addr, seen)
}

fn at_engine(upstreams: &[SocketAddr], policy_name: &str) -> GatewayConfig {
    GatewayConfig {
        policy: policy(policy_name),
        engine_order: Some(EngineOrder::default()),
        scrape: None,
        ..config(upstreams, 1)
    }
}

fn stated(tag: &str, tokens: u64, priority: i64) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": tokens, "ignore_eos": true,
        "priority": priority, "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

/// Three small requests one after another: each answer's status and body.
async fn three_requests(addr: SocketAddr) -> Vec<(hyper::StatusCode, bytes::Bytes)> {
    let mut out = Vec::new();
    for i in 0..3 {
        let (status, _, body) =
            post(addr, "/v1/chat/completions", chat(&i.to_string(), 5, false)).await;
        out.push((status, body));
    }
    out
}

#[test]
fn every_request_goes_at_once_numbered_in_the_policys_order() {
    let rt = runtime();
    let (engine, seen) = recording(&rt, Duration::from_millis(300), |_| OK.to_vec());
    let gw = serve(at_engine(&[engine], "sagesched-oracle"));
    let addr = gw.addr();
    rt.block_on(async {
        // The clients' own priorities (0, 0, and 7 on the short one) are replaced.
        let sends = [("long", 500, 0), ("short", 20, 7), ("middle", 200, 0)]
            .map(|(t, n, p)| tokio::spawn(post(addr, "/v1/chat/completions", stated(t, n, p))));
        // With --concurrency 1, all three reach the engine while the first is held.
        until("all three at the engine", || {
            seen.lock().expect("seen").len() == 3
        })
        .await;
        for s in sends {
            assert_eq!(s.await.expect("joined").0, 200);
        }
    });
    let seen = seen.lock().expect("seen").clone();
    let number = |tag: &str| {
        let v = seen.iter().find(|v| v["user"] == tag).expect("seen");
        v["priority"].as_i64().expect("a number")
    };
    // Priority 7 (vLLM's: less urgent) is class -7: sheddable, below the others.
    assert!(number("middle") < number("long"), "{seen:?}");
    assert!(number("long") < number("short"), "{seen:?}");
}

#[test]
fn an_engine_refusing_numbers_gets_the_request_without_and_is_ordered_by_the_gateway() {
    let rt = runtime();
    let refusal = error(
        "400 Bad Request",
        "Got priority 12 but Priority scheduling is not enabled.",
    );
    let (engine, seen) = recording(&rt, Duration::ZERO, move |v| {
        if v.get("priority").is_some() {
            refusal.clone()
        } else {
            OK.to_vec()
        }
    });
    let gw = serve(at_engine(&[engine], "fcfs"));
    for (status, body) in rt.block_on(three_requests(gw.addr())) {
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    let seen = seen.lock().expect("seen").clone();
    let numbered: Vec<bool> = seen.iter().map(|v| v.get("priority").is_some()).collect();
    // The first was refused once and sent again without; the rest went without.
    assert_eq!(numbered, [true, false, false, false]);
}

#[test]
fn an_engines_own_400_reaches_the_client_and_frees_the_slot() {
    let rt = runtime();
    let too_long = error(
        "400 Bad Request",
        "This model's maximum context length is 2048 tokens. However, you requested 9000 tokens.",
    );
    let (engine, seen) = recording(&rt, Duration::ZERO, move |_| too_long.clone());
    let gw = serve(GatewayConfig {
        engine_order: Some(EngineOrder {
            holds: 1,
            horizon_s: 60.0,
        }),
        ..at_engine(&[engine], "fcfs")
    });
    // Holding one at most: each 400 must free its place for the next.
    for (status, body) in rt.block_on(three_requests(gw.addr())) {
        assert_eq!(status, 400);
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("maximum context length"), "{text}");
    }
    assert_eq!(seen.lock().expect("seen").len(), 3);
}
