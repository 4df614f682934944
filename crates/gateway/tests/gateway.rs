//! The gateway in front of a fake engine (an HTTP server in this test that records what reaches
//! it): first-come-first-served admission within the concurrency limit, answers passed through
//! byte for byte (streamed and not), a slot freed when its client disconnects mid-stream, and
//! bad input answered without losing anything; SageSched ordering learned online from the
//! engine's answers, and the routers over two engines. The real engine (llama.cpp) is in
//! `crates/cli/tests/llm_serve.rs`.

use hyper::StatusCode;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xsched_gateway::{Gateway, GatewayConfig, RequestPolicySpec, Router, RunningGateway};

mod support;
use support::*;

#[test]
fn one_slot_means_the_engine_sees_one_request_at_a_time_in_arrival_order() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 1, 64);
    let addr = gw.addr();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..6u64 {
            tasks.push(tokio::spawn(post(
                addr,
                "/v1/chat/completions",
                chat(&format!("r{i}"), 30, false),
            )));
            // The next is sent once this one reached the queue, so the order is known.
            until("the request to reach the gateway's queue", || {
                gw.arrivals() > i
            })
            .await;
        }
        for t in tasks {
            let (status, engine, _) = t.await.expect("task");
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                engine.as_deref(),
                Some("fake"),
                "the engine's headers pass through"
            );
        }
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["r0", "r1", "r2", "r3", "r4", "r5"]);
    assert_eq!(seen.most_in_flight.load(Ordering::SeqCst), 1);
}

#[test]
fn answers_pass_through_byte_for_byte_streamed_and_not() {
    let rt = runtime();
    let (engine, _) = start_engine(&rt);
    let gw = gateway(&[engine], 4, 64);
    rt.block_on(async {
        for stream in [false, true] {
            let direct = post(engine, "/v1/chat/completions", chat("same", 100, stream)).await;
            let through = post(gw.addr(), "/v1/chat/completions", chat("same", 100, stream)).await;
            assert_eq!(direct.0, through.0);
            assert_eq!(direct.2, through.2, "stream {stream}");
        }
        let models = post(gw.addr(), "/v1/models", String::new()).await;
        assert_eq!(models.0, StatusCode::NOT_FOUND, "models is a GET");
        let (direct, through) = (
            get(engine, "/v1/models").await,
            get(gw.addr(), "/v1/models").await,
        );
        assert_eq!(direct, through, "GET /v1/models goes to the engine");
        assert_eq!(through.0, StatusCode::OK);
    });
}

#[test]
fn a_burst_of_events_and_a_large_body_pass_through_whole() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 4, 64);
    rt.block_on(async {
        // 500 events sent at once: the gateway gathers what it has read into fewer writes, and
        // the client gets the same bytes.
        let direct = post(engine, "/v1/chat/completions", chat("burst", 10_000, true)).await;
        let through = post(
            gw.addr(),
            "/v1/chat/completions",
            chat("burst", 10_000, true),
        )
        .await;
        assert_eq!(through.0, StatusCode::OK);
        assert_eq!(direct.2, through.2);
        let text = String::from_utf8_lossy(&through.2);
        assert_eq!(text.matches("data: {").count(), 500);
        assert!(text.ends_with("data: [DONE]\n\n"));
        // A 1 MiB prompt is checked off the runtime's thread and forwarded.
        let big = serde_json::json!({
            "model": "m", "user": "big", "max_tokens": 1,
            "messages": [{"role": "user", "content": "x".repeat(1 << 20)}],
        });
        let answer = post(gw.addr(), "/v1/chat/completions", big.to_string()).await;
        assert_eq!(answer.0, StatusCode::OK, "{:?}", answer.2);
        let bad = format!("{{\"model\": \"{}\"", "x".repeat(1 << 20));
        let answer = post(gw.addr(), "/v1/chat/completions", bad).await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST);
    });
    assert_eq!(
        seen.order.lock().expect("order").last().map(String::as_str),
        Some("big")
    );
}

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
fn a_client_gone_mid_stream_frees_its_slot_for_the_next() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 1, 64);
    let addr = gw.addr();
    rt.block_on(async {
        // A raw client reads the first event of a 60 s stream, then hangs up.
        read_then_hang_up(addr, chat("cut", 60_000, true), "\"i\":0").await;
        // With one slot, this is admitted only once the cut stream's slot is free.
        let (status, _, _) = post(addr, "/v1/chat/completions", chat("next", 10, false)).await;
        assert_eq!(status, StatusCode::OK);
    });
    assert_eq!(*seen.order.lock().expect("order"), ["cut", "next"]);
    // The engine notices at its next event that the gateway dropped the upstream connection.
    let start = std::time::Instant::now();
    while seen.cut.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the engine never saw the client go"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn bad_input_gets_a_clear_answer_and_loses_nothing() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 1, 1);
    let addr = gw.addr();
    rt.block_on(async {
        let (status, _, body) = post(addr, "/v1/chat/completions", r#"{"model":"m"}"#.into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let err: serde_json::Value = serde_json::from_slice(&body).expect("JSON error");
        assert_eq!(err["error"]["param"], "messages", "{err}");
        let (status, _, _) = post(addr, "/v2/unknown", "{}".into()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // One in flight, one waiting: a third is refused at once, the others still answered.
        // The engine holds the first until the test lets it go.
        let slow = tokio::spawn(post(addr, "/v1/chat/completions", chat("hold", 0, false)));
        until("the first in flight", || gw.load().1[0] == 1).await;
        let waiting = tokio::spawn(post(addr, "/v1/chat/completions", chat("b", 10, false)));
        until("the second queued", || gw.load().0 == 1).await;
        let (status, _, body) = post(addr, "/v1/chat/completions", chat("c", 10, false)).await;
        assert_eq!(
            status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            String::from_utf8_lossy(&body)
        );
        seen.gate.add_permits(1);
        assert_eq!(slow.await.expect("hold").0, StatusCode::OK);
        assert_eq!(waiting.await.expect("b").0, StatusCode::OK);
    });
    assert_eq!(*seen.order.lock().expect("order"), ["hold", "b"]);
    // An engine that is not there (down, or not started yet): a 503 with the reason and
    // `Retry-After`.
    let dead: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr")
    };
    let gw = gateway(&[dead], 1, 4);
    rt.block_on(async {
        let (status, headers, body) =
            post_with(gw.addr(), "/v1/chat/completions", chat("x", 1, false), &[]).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(headers.contains_key("retry-after"));
        assert!(
            String::from_utf8_lossy(&body).contains("refuses connections"),
            "{body:?}"
        );
    });
}

#[test]
fn a_config_without_upstreams_or_with_zero_bounds_is_refused() {
    let base = GatewayConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        vec!["http://127.0.0.1:9".parse().expect("uri")],
        1,
    );
    for (config, names) in [
        (
            GatewayConfig {
                upstreams: vec![],
                ..base.clone()
            },
            "upstream",
        ),
        (
            GatewayConfig {
                upstreams: vec!["https://x".parse().expect("uri")],
                ..base.clone()
            },
            "http://",
        ),
        (
            GatewayConfig {
                concurrency: 0,
                ..base.clone()
            },
            "concurrency",
        ),
        (
            GatewayConfig {
                max_waiting: 0,
                ..base.clone()
            },
            "queue",
        ),
        (
            GatewayConfig {
                history: 0,
                ..base.clone()
            },
            "history",
        ),
    ] {
        let err = Gateway::bind(config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(names), "{err}");
    }
    assert!("srpt".parse::<RequestPolicySpec>().is_err());
    for (simulated, why) in [
        ("sagesched-noise-0.5", "true answer lengths"),
        ("fastserve", "fastserve:preempt=off"),
        ("trail", "trail:preempt=off"),
    ] {
        let err = Gateway::bind(GatewayConfig {
            policy: policy(simulated),
            ..base.clone()
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains(why), "{simulated}: {err}");
    }
}

#[test]
fn the_load_generator_measures_every_request_it_sends() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 8, 64);
    let config = xsched_load::LoadConfig {
        url: format!("http://{}", gw.addr()).parse().expect("uri"),
        prompts: vec!["hello".into(), "again".into()],
        arrivals: xsched_load::Arrivals::Poisson(50.0),
        duration: Duration::from_millis(400),
        requests: None,
        // The fake engine streams one event per 20 ms of max_tokens.
        max_tokens: 100,
        answer_tokens: Vec::new(),
        seed: 3,
    };
    let samples = xsched_load::run(&config).expect("a run");
    assert!(!samples.is_empty(), "some arrivals within 400 ms at 50/s");
    for s in &samples {
        assert_eq!(s.status, 200, "{s:?}");
        assert_eq!(s.chunks, 5, "{s:?}");
        assert!(s.ttft.is_some_and(|t| t <= s.ttlt), "{s:?}");
    }
    assert_eq!(seen.order.lock().expect("order").len(), samples.len());
    let summary = xsched_load::summary(&samples);
    assert_eq!(summary["answered"], samples.len());
    let prompts: Vec<usize> = samples.iter().map(|s| s.prompt).collect();
    let cycled: Vec<usize> = (0..samples.len()).map(|i| i % 2).collect();
    assert_eq!(prompts, cycled, "prompts in order, cycled");
    // Sequentially: each request alone, sent after the previous answer ended.
    let alone = xsched_load::run(&xsched_load::LoadConfig {
        arrivals: xsched_load::Arrivals::Sequential,
        requests: Some(3),
        ..config.clone()
    })
    .expect("a run");
    assert_eq!(alone.len(), 3);
    for pair in alone.windows(2) {
        assert!(
            pair[1].sent >= pair[0].sent + pair[0].ttlt,
            "sent after the previous ended: {pair:?}"
        );
    }
    // A trace's gaps, and each prompt's recorded length (capped at max_tokens).
    let traced = xsched_load::run(&xsched_load::LoadConfig {
        arrivals: xsched_load::Arrivals::Gaps(vec![0.05, 0.1].into()),
        requests: Some(4),
        answer_tokens: vec![40, 500],
        ..config.clone()
    })
    .expect("a run");
    let chunks: Vec<usize> = traced.iter().map(|s| s.chunks).collect();
    assert_eq!(chunks, [2, 5, 2, 5], "40 tokens, then 500 capped at 100");
    let sent: Vec<f64> = traced.iter().map(|s| s.sent).collect();
    for (s, at) in sent.iter().zip([0.05, 0.15, 0.2, 0.3]) {
        assert!(*s >= at - 1e-3, "sent at {sent:?}");
    }
    for empty in [
        xsched_load::LoadConfig {
            arrivals: xsched_load::Arrivals::Gaps(Vec::new().into()),
            ..config.clone()
        },
        xsched_load::LoadConfig {
            arrivals: xsched_load::Arrivals::Poisson(0.0),
            ..config.clone()
        },
        xsched_load::LoadConfig {
            requests: Some(0),
            ..config
        },
    ] {
        assert!(
            xsched_load::run(&empty).is_err(),
            "sends nothing: {empty:?}"
        );
    }
}

#[test]
fn metrics_count_every_answer_with_its_waits() {
    let rt = runtime();
    let (engine, _) = start_engine(&rt);
    let gw = gateway(&[engine], 2, 64);
    rt.block_on(async {
        for stream in [false, true, true] {
            let (status, _, _) =
                post(gw.addr(), "/v1/chat/completions", chat("m", 40, stream)).await;
            assert_eq!(status, StatusCode::OK);
        }
        let (status, _, _) = post(gw.addr(), "/v1/chat/completions", "{}".into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, text) = get(gw.addr(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        let text = String::from_utf8_lossy(&text);
        for line in [
            "xsched_gateway_queue_wait_seconds_count{policy=\"fcfs\"} 3",
            "xsched_gateway_ttft_seconds_count{policy=\"fcfs\"} 3",
            "xsched_gateway_ttlt_seconds_count{policy=\"fcfs\"} 3",
            "xsched_gateway_own_seconds_count{policy=\"fcfs\"} 3",
            "xsched_gateway_answers_total{policy=\"fcfs\",status=\"2xx\"} 3",
            "xsched_gateway_answers_total{policy=\"fcfs\",status=\"4xx\"} 1",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    });
}

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

/// Send a streamed chat to `addr` on a raw connection, read until `until` arrives, hang up.
async fn read_then_hang_up(addr: SocketAddr, body: String, until: &str) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("send");
    let mut buf = vec![0u8; 4096];
    let mut got = String::new();
    while !got.contains(until) {
        let n = s.read(&mut buf).await.expect("read");
        assert!(n > 0, "the stream ended early: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
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
