//! The picker against the engine simulator: the same learned sequence admitted in the same
//! order, and the serving script decided alike.

use crate::picker;
use crate::stream::Stream;
use crate::support::{
    ARRIVAL_ORDER, chat, learned_in, policy, runtime, sequence, simulated_order, until, with_tokens,
};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fake engine answers a body built by `with_tokens` (its usage counted).
fn engine_answer(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).expect("json");
    serde_json::json!({
        "id": v["user"], "choices": [{"text": "ok"}],
        "usage": {"prompt_tokens": v["prompt_tokens"], "completion_tokens": v["answer_tokens"]},
    })
    .to_string()
}

/// A request's whole exchange: placed, body back, answered with `answer`.
async fn served(addr: SocketAddr, body: &str, answer: &str) {
    let mut s = Stream::open(addr).await;
    s.request(body, &[], None).await;
    s.endpoint().await;
    s.body().await;
    s.answer(answer).await;
}

#[test]
fn the_picker_and_the_simulator_admit_the_same_sequence_in_the_same_order() {
    let prompts = sequence();
    let rt = runtime();
    let sage = "sagesched-noaging";
    let epp = picker(&["10.0.0.1:8000"], 1, |c| c.policy = policy(sage));
    let addr = epp.addr();
    let order = rt.block_on(async {
        // Taught every prompt four times, one at a time, as the simulator's history is filled.
        let mut taught = 0;
        for _ in 0..4 {
            for (prompt, tokens) in &prompts {
                let body = with_tokens("teach", prompt, *tokens);
                served(addr, &body, &engine_answer(&body)).await;
                taught += 1;
                until("learned", || learned_in(&epp.metrics(), sage) >= taught).await;
            }
        }
        // The one slot held while the sequence queues behind it, then freed.
        let mut held = Stream::open(addr).await;
        held.request(&chat("hold", 0, false), &[], None).await;
        held.endpoint().await;
        held.body().await;
        let (before, order) = (epp.arrivals(), Arc::new(Mutex::new(Vec::new())));
        let mut tasks = Vec::new();
        for (i, &k) in ARRIVAL_ORDER.iter().enumerate() {
            let body = with_tokens(&format!("q{k}"), &prompts[k].0, prompts[k].1);
            let mut s = Stream::open(addr).await;
            s.request(&body, &[], None).await;
            until("queued", || epp.arrivals() == before + i as u64 + 1).await;
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                s.endpoint().await;
                s.body().await;
                order.lock().expect("order").push(format!("q{k}"));
                s.answer(&engine_answer(&body)).await;
            }));
        }
        held.answer(r#"{"id":"hold","choices":[{"text":"ok"}]}"#)
            .await;
        for t in tasks {
            t.await.expect("a queued request served");
        }
        order.lock().expect("order").clone()
    });
    // The gateway's own test (`gateway/learning.rs`) checks it against the same simulated order.
    assert_eq!(order, simulated_order(&prompts, &ARRIVAL_ORDER));
}

/// The serving script (`support::SCRIPT`) through the picker, which scrapes the two fake
/// engines' metrics as the gateway does: the same endpoints and the same refusals, for the
/// same reasons, as the simulator's and the gateway's (`classes/parity.rs`).
#[test]
fn the_picker_and_the_simulator_decide_the_serving_script_alike() {
    use crate::support::{
        SCRIPT, SCRIPT_CLASSES, queueing, reported_waiting, script_decided, script_headers,
        simulated_decisions, start_engine,
    };
    let rt = runtime();
    let (a, seen_a) = start_engine(&rt);
    let (b, seen_b) = start_engine(&rt);
    *seen_a.metrics.lock().expect("page") = queueing(1);
    *seen_b.metrics.lock().expect("page") = queueing(0);
    let endpoints = [a.to_string(), b.to_string()];
    let names: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let epp = picker(&names, 1, |c| {
        c.classes =
            Arc::new(xsched_gateway::classes::Classes::parse(SCRIPT_CLASSES).expect("valid"));
        c.max_waiting = 2;
        c.scrape = Some(Duration::from_millis(20));
        c.policy = policy("fcfs");
    });
    let addr = epp.addr();
    let decided = rt.block_on(async {
        until("A's queue seen", || reported_waiting(&epp.metrics(), a, 1)).await;
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let mut held = Some(held);
        let mut tasks = Vec::new();
        for (tag, tenant, class) in SCRIPT {
            let headers = script_headers(tenant, class);
            let before = epp.arrivals();
            let hold = if tag == "hold" { held.take() } else { None };
            let task = tokio::spawn(async move {
                let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let mut s = Stream::open(addr).await;
                s.request(&chat(tag, 0, false), &h, None).await;
                let decided = s.decided().await;
                if decided.is_ok() {
                    s.body().await;
                    if let Some(hold) = hold {
                        hold.await.expect("released");
                    }
                    s.answer("{}").await;
                }
                decided
            });
            // Settled: refused at once, or counted (waiting or placed).
            until(tag, || task.is_finished() || epp.arrivals() > before).await;
            tasks.push((tag, task));
        }
        *seen_a.metrics.lock().expect("page") = queueing(0);
        let placed_on_a = |tasks: &[(&str, tokio::task::JoinHandle<_>)]| {
            tasks
                .iter()
                .filter(|(t, task)| *t != "hold" && task.is_finished())
                .count()
        };
        until("all but hold settled", || {
            placed_on_a(&tasks) == SCRIPT.len() - 1
        })
        .await;
        release.send(()).expect("hold waits");
        let mut decided = std::collections::BTreeMap::new();
        for (tag, task) in tasks {
            // The endpoint first, its fallbacks after it.
            let first = |e: &str| e.split(',').next().unwrap_or_default().to_string();
            let d = match task.await.expect("task").map(|e| first(&e)) {
                Ok(endpoint) if endpoint == endpoints[0] => "A".to_string(),
                Ok(endpoint) if endpoint == endpoints[1] => "B".to_string(),
                Ok(endpoint) => panic!("{tag} placed at {endpoint}, not in the pool"),
                Err(reason) => reason,
            };
            decided.insert(tag.to_string(), d);
        }
        decided
    });
    assert_eq!(decided, simulated_decisions());
    assert_eq!(decided, script_decided());
}
