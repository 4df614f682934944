//! The gateway in front of a fake engine (an HTTP server in this test that records what reaches
//! it): first-come-first-served admission within the concurrency limit, answers passed through
//! byte for byte (streamed and not), a slot freed when its client disconnects mid-stream, and
//! bad input answered without losing anything; SageSched ordering learned online from the
//! engine's answers, and the routers over two engines. The real engine (llama.cpp) is in
//! `crates/cli/tests/llm_serve.rs`.

#[path = "../support/mod.rs"]
mod support;

mod learning;
mod upstreams;

use hyper::StatusCode;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xsched_gateway::{Gateway, GatewayConfig, RequestPolicySpec};

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
