//! The upstreams: a concurrency learned where more in flight buys nothing, an engine's own
//! slots read from it, and the routers over two engines.

use crate::support::{chat, config, get, post, runtime, serve, start_engine, until};
use hyper::StatusCode;
use std::sync::atomic::Ordering;
use std::time::Duration;
use xsched_gateway::{GatewayConfig, Router};

#[test]
fn a_learned_concurrency_steps_down_where_more_in_flight_buys_no_throughput() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        learn_concurrency: true,
        ..config(&[engine], 4)
    });
    let request = |i: usize| {
        serde_json::json!({
            "model": "m", "user": format!("r{i}"), "ms": 40, "shared": true,
            "answer_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
        })
        .to_string()
    };
    rt.block_on(async {
        // A backlog throughout: 40 clients, each sending its next request as its answer comes.
        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let addr = gw.addr();
        let clients: Vec<_> = (0..40)
            .map(|_| {
                let next = next.clone();
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= 160 {
                            return;
                        }
                        let answer = post(addr, "/v1/chat/completions", request(i)).await;
                        assert_eq!(answer.0, StatusCode::OK);
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.expect("client");
        }
        let metrics = get(gw.addr(), "/metrics").await.1;
        let metrics = String::from_utf8_lossy(&metrics);
        let learned = metrics
            .lines()
            .find(|l| l.starts_with("xsched_gateway_upstream_learned_concurrency{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<usize>().ok());
        // Each request's own cost (HTTP, timers) makes fewer in flight a little slower: down to
        // 1 or 2, as that cost falls within 5 % of the throughput or not.
        assert!(learned.is_some_and(|l| l <= 2), "{learned:?}: {metrics}");
    });
    assert_eq!(
        seen.most_in_flight.load(Ordering::SeqCst),
        4,
        "it started at the most"
    );
}

#[test]
fn round_robin_alternates_engines_where_least_outstanding_takes_the_first_idle_one() {
    let rt = runtime();
    let engines = [start_engine(&rt), start_engine(&rt)];
    let addrs = [engines[0].0, engines[1].0];
    for (router, expected) in [
        (Router::RoundRobin, [2, 2]),
        (Router::LeastOutstanding, [4, 0]),
        (Router::CostAware, [4, 0]),
    ] {
        let gw = serve(GatewayConfig {
            router,
            ..config(&addrs, 4)
        });
        let before = engines
            .each_ref()
            .map(|(_, s)| s.order.lock().expect("o").len());
        rt.block_on(async {
            // One at a time: both engines are idle at every decision.
            for _ in 0..4 {
                let (status, _, _) =
                    post(gw.addr(), "/v1/chat/completions", chat("r", 0, false)).await;
                assert_eq!(status, StatusCode::OK);
            }
        });
        let seen: Vec<usize> = engines
            .iter()
            .zip(before)
            .map(|((_, s), b)| s.order.lock().expect("o").len() - b)
            .collect();
        assert_eq!(seen, expected, "{}", router.name());
    }
}

#[test]
fn an_engine_with_fewer_slots_than_the_concurrency_gets_no_more_than_its_slots() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    *seen.props.lock().expect("props") = Some(r#"{"total_slots":2}"#.into());
    *seen.metrics.lock().expect("metrics") =
        Some("llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n".into());
    let gw = serve(GatewayConfig {
        scrape: Some(Duration::from_millis(20)),
        ..config(&[engine], 8)
    });
    let addr = gw.addr();
    rt.block_on(async {
        // Until its slots are read, --concurrency alone bounds it.
        let start = std::time::Instant::now();
        loop {
            let (_, m) = get(addr, "/metrics").await;
            let m = String::from_utf8_lossy(&m).into_owned();
            let line = m
                .lines()
                .find(|l| l.starts_with("xsched_gateway_upstream_concurrency{"))
                .map(str::to_string);
            if line.as_deref().is_some_and(|l| l.ends_with(" 2")) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "slots never read: {line:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                tokio::spawn(post(
                    addr,
                    "/v1/chat/completions",
                    chat(&format!("r{i}"), 40, false),
                ))
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.expect("task").0, StatusCode::OK);
        }
        let (_, metrics) = get(addr, "/metrics").await;
        let metrics = String::from_utf8_lossy(&metrics);
        assert!(
            metrics.contains("xsched_gateway_upstream_running{policy=\"fcfs\",upstream="),
            "the engine's own figures are shown: {metrics}"
        );
    });
    assert_eq!(
        seen.most_in_flight.load(Ordering::SeqCst),
        2,
        "its 2 slots, not 8"
    );
}

/// A chat request tagged `tag` whose messages are `turns` (role, text).
fn conversation(tag: &str, turns: &[(&str, &str)]) -> String {
    let messages: Vec<serde_json::Value> = turns
        .iter()
        .map(|(role, text)| serde_json::json!({"role": role, "content": text}))
        .collect();
    serde_json::json!({"model": "m", "user": tag, "max_tokens": 0, "messages": messages})
        .to_string()
}

#[test]
fn the_prefix_affinity_router_keeps_each_conversation_on_the_engine_that_has_its_prompt() {
    let rt = runtime();
    let engines = [start_engine(&rt), start_engine(&rt)];
    let gw = serve(GatewayConfig {
        router: Router::PrefixAffinity,
        ..config(&[engines[0].0, engines[1].0], 4)
    });
    let (a, b) = ("a".repeat(600), "b".repeat(600));
    rt.block_on(async {
        // Two conversations start at once: the second goes to the idle engine.
        let first = tokio::spawn(post(
            gw.addr(),
            "/v1/chat/completions",
            conversation("hold", &[("user", &a)]),
        ));
        until("a's first turn runs", || gw.load().1 == [1, 0]).await;
        let (status, _, _) = post(
            gw.addr(),
            "/v1/chat/completions",
            conversation("b1", &[("user", &b)]),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        engines[0].1.gate.add_permits(1);
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        // Each next turn repeats its conversation, and goes where that ran, though both
        // engines are idle.
        for (tag, history) in [("b2", &b), ("a2", &a), ("b3", &b)] {
            let body = conversation(
                tag,
                &[("user", history), ("assistant", "ok"), ("user", "and?")],
            );
            let (status, _, _) = post(gw.addr(), "/v1/chat/completions", body).await;
            assert_eq!(status, StatusCode::OK, "{tag}");
        }
    });
    let seen = |e: usize| engines[e].1.order.lock().expect("order").clone();
    assert_eq!(seen(0), ["hold", "a2"]);
    assert_eq!(seen(1), ["b1", "b2", "b3"]);
}
