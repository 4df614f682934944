//! Orders learned from the engine's answers: SageSched's predictions (from answers counted
//! whole, and from streams counted as they pass), the oracle's stated lengths, and the same
//! sequence admitted in the simulator's order.

use crate::read_then_hang_up;
use crate::support::{
    ARRIVAL_ORDER, Seen, chat, config, get, learned_in, policy, post, runtime, sequence, serve,
    simulated_order, start_engine, until, with_tokens,
};
use hyper::StatusCode;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use xsched_gateway::{GatewayConfig, RunningGateway};

/// A chat request whose answer the fake engine makes `answer_tokens` long, taking `ms`.
fn sized(tag: &str, prompt: &str, answer_tokens: u64, ms: u64) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": 4096, "ms": ms, "answer_tokens": answer_tokens,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string()
}

/// Hold the gateway's one slot with `hold` (a request tagged `hold`, which the fake engine keeps
/// until a permit), queue `queued` in turn (each reaching the queue before the next is sent),
/// then let the held one end; every answer is a 200.
async fn queue_behind_a_held_request(
    gw: &RunningGateway,
    seen: &Seen,
    hold: String,
    queued: impl IntoIterator<Item = String>,
) {
    let addr = gw.addr();
    let held = tokio::spawn(post(addr, "/v1/chat/completions", hold));
    until("the held request to reach the engine", || {
        seen.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let mut tasks = Vec::new();
    for (i, body) in queued.into_iter().enumerate() {
        tasks.push(tokio::spawn(post(addr, "/v1/chat/completions", body)));
        until("the request to queue", || gw.load().0 > i).await;
    }
    seen.gate.add_permits(1);
    assert_eq!(held.await.expect("task").0, StatusCode::OK);
    for t in tasks {
        assert_eq!(t.await.expect("task").0, StatusCode::OK);
    }
}

const SHORT: &str = "answer yes or no please";
const LONG: &str = "write a long detailed essay on the history of the roman empire";

#[test]
fn sagesched_learns_from_answers_to_admit_the_predicted_short_request_first() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        policy: policy("sagesched"),
        ..config(&[engine], 1)
    });
    let addr = gw.addr();
    rt.block_on(async {
        // Teach it: one at a time, so every answer is learned before the next is placed. Each
        // takes 50 ms: the aging guard then measures about 0.1 ms per token, and the long
        // request ages after 100 × its ~600 predicted tokens × 0.1 ms, seconds after this test
        // needs it to wait.
        for i in 0..20 {
            for (prompt, tokens) in [(SHORT, 2), (LONG, 900)] {
                let (status, _, _) = post(
                    addr,
                    "/v1/chat/completions",
                    sized(&format!("t{i}"), prompt, tokens, 50),
                )
                .await;
                assert_eq!(status, StatusCode::OK);
            }
        }
        // Learning runs on a blocking thread after each answer: let it catch up.
        until_learned(addr, "sagesched", 40).await;
        let queued = [("long", LONG), ("short", SHORT)].map(|(tag, p)| sized(tag, p, 1, 0));
        queue_behind_a_held_request(&gw, &seen, chat("hold", 0, false), queued).await;
        // 40 taught, 2 measured; the held request's answer had no usage and is not learned.
        until_learned(addr, "sagesched", 42).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(learned(addr, "sagesched").await, 42, "and nothing more");
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(
        &order[order.len() - 2..],
        ["short", "long"],
        "arrived long first, admitted short first"
    );
}

/// A chat request that states its answer's length: `ignore_eos` with `max_tokens` (the fake
/// engine answers at once).
fn stated(tag: &str, tokens: u64) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": tokens, "ignore_eos": true, "ms": 0,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

#[test]
fn the_oracle_admits_the_shortest_stated_length_first_and_refuses_a_request_stating_none() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        policy: policy("srpt-oracle"),
        ..config(&[engine], 1)
    });
    let addr = gw.addr();
    rt.block_on(async {
        let (status, _, body) =
            post(addr, "/v1/chat/completions", chat("unstated", 5, false)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            String::from_utf8_lossy(&body).contains("ignore_eos"),
            "the field is named: {body:?}"
        );
        let queued = [("long", 500), ("middle", 60), ("short", 3)].map(|(t, n)| stated(t, n));
        queue_behind_a_held_request(&gw, &seen, stated("hold", 1), queued).await;
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(
        order,
        ["hold", "short", "middle", "long"],
        "the unstated request never reached the engine; the rest shortest stated first"
    );
}

/// Answers the gateway at `addr` has learned from (its predictor-error count).
async fn learned(addr: SocketAddr, policy: &str) -> u64 {
    let (_, text) = get(addr, "/metrics").await;
    learned_in(&String::from_utf8_lossy(&text), policy)
}

/// Wait until the gateway at `addr` has learned from `n` answers, failing after 30 s.
async fn until_learned(addr: SocketAddr, policy: &str, n: u64) {
    let start = std::time::Instant::now();
    while learned(addr, policy).await < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not {n} answers learned"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn both_sagesched_policies_learn_from_streams_counted_as_they_pass() {
    let rt = runtime();
    let (engine, _) = start_engine(&rt);
    for name in ["sagesched", "sagesched-time"] {
        let gw = serve(GatewayConfig {
            policy: policy(name),
            ..config(&[engine], 2)
        });
        rt.block_on(async {
            for _ in 0..3 {
                // 100 ms: five events with content.
                let (status, _, _) =
                    post(gw.addr(), "/v1/chat/completions", chat("s", 100, true)).await;
                assert_eq!(status, StatusCode::OK);
            }
            until_learned(gw.addr(), name, 3).await;
        });
    }
}

#[test]
fn a_stream_read_to_its_done_is_learned_and_one_cut_short_is_not() {
    let rt = runtime();
    let (engine, _) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        policy: policy("sagesched"),
        ..config(&[engine], 1)
    });
    rt.block_on(async {
        // Like the openai client: it closes as soon as it has read `[DONE]`.
        read_then_hang_up(gw.addr(), chat("linger", 60, true), "[DONE]").await;
        until_learned(gw.addr(), "sagesched", 1).await;
        // Gone after the first of 3 000 events: its length is unknown, nothing is learned.
        read_then_hang_up(gw.addr(), chat("cut", 60_000, true), "\"i\":0").await;
        let (status, _, _) = post(gw.addr(), "/v1/chat/completions", chat("n", 0, false)).await;
        assert_eq!(status, StatusCode::OK, "the cut stream's slot is free");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(learned(gw.addr(), "sagesched").await, 1);
    });
}

#[test]
fn the_gateway_and_the_simulator_admit_the_same_sequence_in_the_same_order() {
    let prompts = sequence();
    let arrival_order = ARRIVAL_ORDER;
    // Through the gateway: teach it every prompt four times, one at a time, then hold its one
    // slot while the sequence queues, and release it.
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        policy: policy("sagesched-noaging"),
        ..config(&[engine], 1)
    });
    let addr = gw.addr();
    rt.block_on(async {
        let mut taught = 0;
        for _ in 0..4 {
            for (prompt, tokens) in &prompts {
                let body = with_tokens("teach", prompt, *tokens);
                assert_eq!(
                    post(addr, "/v1/chat/completions", body).await.0,
                    StatusCode::OK
                );
                taught += 1;
                // Learned in this order, as the simulator's history is filled.
                until_learned(addr, "sagesched-noaging", taught).await;
            }
        }
        let queued = arrival_order.iter().map(|&k| {
            let (prompt, tokens) = &prompts[k];
            with_tokens(&format!("q{k}"), prompt, *tokens)
        });
        queue_behind_a_held_request(&gw, &seen, chat("hold", 0, false), queued).await;
    });
    let order = seen.order.lock().expect("order").clone();
    let through_gateway: Vec<String> = order[order.len() - arrival_order.len()..].to_vec();
    let through_simulator = simulated_order(&prompts, &arrival_order);
    assert_eq!(through_gateway, through_simulator);
    // And the order is the predictions' (the two longest answers last), not the arrivals'.
    let mut last_two = through_simulator[6..].to_vec();
    last_two.sort();
    assert_eq!(last_two, ["q1", "q5"], "{through_simulator:?}");
}
