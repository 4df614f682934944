//! Classes and tenants through the gateway, in front of the fake engine: a higher class is
//! forwarded first, a sheddable request is shed with a 503 and `Retry-After` when too many of
//! its kind wait, a tenant over its limit gets a 429 naming it, a bad class or tenant header is
//! a 400 naming the header, and `/metrics` counts by class band and tenant.

use hyper::StatusCode;
use std::sync::Arc;
use xsched_gateway::classes::{
    Classes, OBJECTIVE_HEADER, PRIORITY_HEADER, SLO_TTFT_HEADER, TENANT_HEADER,
};
use xsched_gateway::{GatewayConfig, RunningGateway};

mod support;
use support::*;

const CHAT: &str = "/v1/chat/completions";
/// The headers of a sheddable request and of a critical one (llm-d's objective header).
const SHEDDABLE: &[(&str, &str)] = &[(OBJECTIVE_HEADER, "sheddable")];
const CRITICAL: &[(&str, &str)] = &[(OBJECTIVE_HEADER, "critical")];

/// Whether `/metrics` at `addr` has `line`.
async fn metrics_have(addr: std::net::SocketAddr, line: &str) {
    let (_, metrics) = get(addr, "/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(metrics.contains(line), "{line} in {metrics}");
}

/// A gateway with the classes file `text` and `concurrency` slots in front of the fake engine.
fn with_classes(
    text: &str,
    concurrency: usize,
) -> (tokio::runtime::Runtime, RunningGateway, Arc<Seen>) {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        classes: Arc::new(Classes::parse(text).expect("a valid classes file")),
        ..config(&[engine], concurrency)
    });
    (rt, gw, seen)
}

/// Send a request that takes a slot until `seen.gate` is opened, once it reached the engine.
async fn hold(
    addr: std::net::SocketAddr,
    seen: &Seen,
    headers: &'static [(&'static str, &'static str)],
) -> tokio::task::JoinHandle<(StatusCode, hyper::HeaderMap, bytes::Bytes)> {
    let before = seen.order.lock().expect("order").len();
    let held = tokio::spawn(post_with(addr, CHAT, chat("hold", 0, false), headers));
    until("hold reaches the engine", || {
        seen.order.lock().expect("order").len() > before
    })
    .await;
    held
}

#[test]
fn a_higher_class_is_forwarded_before_requests_that_waited_longer() {
    let (rt, gw, seen) = with_classes("", 1);
    let addr = gw.addr();
    rt.block_on(async {
        let first = hold(addr, &seen, &[]).await;
        let standard = tokio::spawn(post(addr, CHAT, chat("standard", 0, false)));
        until("standard waits", || gw.arrivals() == 2).await;
        let critical = tokio::spawn(post_with(
            addr,
            CHAT,
            chat("critical", 0, false),
            &[(OBJECTIVE_HEADER, "critical")],
        ));
        until("critical waits", || gw.arrivals() == 3).await;
        // vLLM's body field, lower wins: priority 5 is class -5, after both.
        let mut body: serde_json::Value =
            serde_json::from_str(&chat("later", 0, false)).expect("json");
        body["priority"] = 5.into();
        let later = tokio::spawn(post(addr, CHAT, body.to_string()));
        until("later waits", || gw.arrivals() == 4).await;
        seen.gate.add_permits(1);
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        for t in [standard, later] {
            assert_eq!(t.await.expect("task").0, StatusCode::OK);
        }
        assert_eq!(critical.await.expect("task").0, StatusCode::OK);
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["hold", "critical", "standard", "later"]);
}

#[test]
fn sheddable_requests_beyond_their_bound_get_a_503_with_retry_after() {
    let (rt, gw, seen) = with_classes("sheddable_waiting = 1", 1);
    let addr = gw.addr();
    rt.block_on(async {
        let first = hold(addr, &seen, &[]).await;
        let waits = tokio::spawn(post_with(addr, CHAT, chat("waits", 0, false), SHEDDABLE));
        until("one sheddable waits", || gw.arrivals() == 2).await;
        let (status, headers, body) =
            post_with(addr, CHAT, chat("shed", 0, false), SHEDDABLE).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        assert!(
            String::from_utf8_lossy(&body).contains("sheddable"),
            "{body:?}"
        );
        // A standard request is not shed for it.
        let standard = tokio::spawn(post(addr, CHAT, chat("standard", 0, false)));
        until("standard waits", || gw.arrivals() == 4).await;
        seen.gate.add_permits(1);
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        assert_eq!(standard.await.expect("task").0, StatusCode::OK);
        assert_eq!(waits.await.expect("task").0, StatusCode::OK);
        metrics_have(
            addr,
            "xsched_gateway_class_shed_total{policy=\"fcfs\",class=\"sheddable\"} 1",
        )
        .await;
        metrics_have(
            addr,
            "xsched_gateway_class_ttlt_seconds_count{policy=\"fcfs\",class=\"standard\"} 2",
        )
        .await;
    });
}

#[test]
fn a_tenant_over_its_limit_gets_a_429_naming_it_and_others_are_served() {
    let (rt, gw, seen) = with_classes(
        "[tenants.nightly]\nmax_requests = 1\n[tenants.web]\nweight = 3\n",
        2,
    );
    let addr = gw.addr();
    const NIGHTLY: &[(&str, &str)] = &[(TENANT_HEADER, "nightly")];
    rt.block_on(async {
        let first = hold(addr, &seen, NIGHTLY).await;
        let (status, _, body) = post_with(addr, CHAT, chat("more", 0, false), NIGHTLY).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body:?}");
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.contains("nightly") && text.contains("max_requests"),
            "{text}"
        );
        let (status, _, _) =
            post_with(addr, CHAT, chat("web", 0, false), &[(TENANT_HEADER, "web")]).await;
        assert_eq!(status, StatusCode::OK, "another tenant is served");
        seen.gate.add_permits(1);
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        let (status, _, _) = post_with(addr, CHAT, chat("again", 0, false), NIGHTLY).await;
        assert_eq!(status, StatusCode::OK, "its place was freed");
        metrics_have(
            addr,
            "xsched_gateway_tenant_requests_total{policy=\"fcfs\",tenant=\"nightly\"} 2",
        )
        .await;
    });
}

#[test]
fn a_bad_class_or_tenant_header_is_a_400_naming_it() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = gateway(&[engine], 1, 64);
    let addr = gw.addr();
    let long = "t".repeat(200);
    rt.block_on(async {
        for (header, value) in [
            (OBJECTIVE_HEADER, "gold"),
            (PRIORITY_HEADER, "urgent"),
            (TENANT_HEADER, long.as_str()),
            (SLO_TTFT_HEADER, "soon"),
            (SLO_TTFT_HEADER, "0"),
            (SLO_TTFT_HEADER, "3600001"),
        ] {
            let (status, _, body) =
                post_with(addr, CHAT, chat("bad", 0, false), &[(header, value)]).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{header}");
            let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(v["error"]["param"], header, "{v}");
        }
        let mut body: serde_json::Value =
            serde_json::from_str(&chat("bad", 0, false)).expect("json");
        body["priority"] = "high".into();
        let (status, _, body) = post(addr, CHAT, body.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["error"]["param"], "priority", "{v}");
    });
    assert!(
        seen.order.lock().expect("order").is_empty(),
        "none reached the engine"
    );
}

#[test]
fn a_full_queue_sheds_its_newest_sheddable_request_for_a_standard_one() {
    let rt = runtime();
    let (engine, seen) = start_engine(&rt);
    let gw = serve(GatewayConfig {
        max_waiting: 2,
        ..config(&[engine], 1)
    });
    let addr = gw.addr();
    rt.block_on(async {
        let first = hold(addr, &seen, &[]).await;
        let older = tokio::spawn(post_with(addr, CHAT, chat("older", 0, false), SHEDDABLE));
        until("older waits", || gw.arrivals() == 2).await;
        let newer = tokio::spawn(post_with(addr, CHAT, chat("newer", 0, false), SHEDDABLE));
        until("newer waits", || gw.arrivals() == 3).await;
        // The queue is full; a standard request takes the newest sheddable one's place.
        let standard = tokio::spawn(post(addr, CHAT, chat("standard", 0, false)));
        let (status, headers, _) = newer.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        seen.gate.add_permits(1);
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        assert_eq!(standard.await.expect("task").0, StatusCode::OK);
        assert_eq!(older.await.expect("task").0, StatusCode::OK);
        assert_eq!(gw.load().0, 0, "nothing left waiting");
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["hold", "standard", "older"]);
}

#[test]
fn a_critical_request_evicts_a_running_sheddable_one_and_a_standard_one_waits() {
    let (rt, gw, seen) = with_classes("", 1);
    let addr = gw.addr();
    rt.block_on(async {
        // A sheddable request holds the slot; a standard one waits behind it, evicting nothing.
        let held = hold(addr, &seen, SHEDDABLE).await;
        let standard = tokio::spawn(post(addr, CHAT, chat("standard", 0, false)));
        until("standard waits", || gw.arrivals() == 2).await;
        assert!(!held.is_finished(), "a standard request evicts nothing");
        // A critical one evicts it before its answer began: a 503 with Retry-After.
        let critical = tokio::spawn(post_with(addr, CHAT, chat("critical", 0, false), CRITICAL));
        let (status, headers, body) = held.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        assert!(
            String::from_utf8_lossy(&body).contains("evicted"),
            "{body:?}"
        );
        assert_eq!(critical.await.expect("task").0, StatusCode::OK);
        assert_eq!(standard.await.expect("task").0, StatusCode::OK);
        // Mid-stream: the stream ends after what it had with an error event saying why.
        let stream = tokio::spawn(post_with(addr, CHAT, chat("long", 2_000, true), SHEDDABLE));
        until("the stream reaches the engine", || {
            seen.order.lock().expect("order").last().map(String::as_str) == Some("long")
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let (status, _, _) = post_with(addr, CHAT, chat("critical", 0, false), CRITICAL).await;
        assert_eq!(status, StatusCode::OK);
        let (status, _, body) = stream.await.expect("task");
        assert_eq!(status, StatusCode::OK);
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with("data: {\"tag\":\"long\""), "{text}");
        let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
        assert!(
            last.starts_with("data: {\"error\"") && last.contains("evicted"),
            "{text}"
        );
        assert!(!text.contains("[DONE]"), "{text}");
        metrics_have(
            addr,
            "xsched_gateway_class_evicted_total{policy=\"fcfs\",class=\"sheddable\"} 2",
        )
        .await;
        until("the engine saw the stream cut", || {
            seen.cut.load(std::sync::atomic::Ordering::SeqCst) >= 1
        })
        .await;
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["hold", "critical", "standard", "long", "critical"]);
}

#[test]
fn a_critical_request_with_a_ttft_deadline_evicts_only_once_waiting_would_miss_it() {
    let (rt, gw, seen) = with_classes("", 1);
    let addr = gw.addr();
    const CRITICAL_1500: &[(&str, &str)] =
        &[(OBJECTIVE_HEADER, "critical"), (SLO_TTFT_HEADER, "1500")];
    rt.block_on(async {
        let held = hold(addr, &seen, SHEDDABLE).await;
        let sent = std::time::Instant::now();
        let critical = tokio::spawn(post_with(
            addr,
            CHAT,
            chat("critical", 0, false),
            CRITICAL_1500,
        ));
        until("critical waits", || gw.arrivals() == 2).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!held.is_finished(), "slack left: nothing evicted yet");
        // Nothing measured yet: it acts once half its deadline is gone.
        let (status, _, _) = held.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        // A lower bound, which no slow machine can fail (it only lengthens the wait): the
        // eviction must not come before half the 1 500 ms deadline is gone. When exactly it
        // comes is the core's decision, tested in virtual time in llm-core.
        assert!(sent.elapsed() >= std::time::Duration::from_millis(750));
        assert_eq!(critical.await.expect("task").0, StatusCode::OK);
        metrics_have(
            addr,
            "xsched_gateway_class_slo_ttft_total{policy=\"fcfs\",class=\"critical\"} 1",
        )
        .await;
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["hold", "critical"]);
}

#[test]
fn evicting_all_clears_the_engine_of_sheddable_requests_while_a_critical_one_runs() {
    let (rt, gw, seen) = with_classes("eviction = \"all\"", 2);
    let addr = gw.addr();
    rt.block_on(async {
        let first = hold(addr, &seen, SHEDDABLE).await;
        let second = hold(addr, &seen, SHEDDABLE).await;
        let critical = tokio::spawn(post_with(addr, CHAT, chat("hold", 0, false), CRITICAL));
        for held in [first, second] {
            let (status, _, body) = held.await.expect("task");
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
        }
        until("the critical one reaches the engine", || {
            seen.order.lock().expect("order").len() == 3
        })
        .await;
        // A slot is free, but not for a sheddable request while the critical one runs.
        let after = tokio::spawn(post_with(addr, CHAT, chat("after", 0, false), SHEDDABLE));
        until("after waits", || gw.load().0 == 1).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(gw.load(), (1, vec![1]), "it still waits");
        // The evicted requests' handlers in the engine wait on the gate too.
        seen.gate.add_permits(3);
        assert_eq!(critical.await.expect("task").0, StatusCode::OK);
        assert_eq!(after.await.expect("task").0, StatusCode::OK);
        metrics_have(
            addr,
            "xsched_gateway_class_evicted_total{policy=\"fcfs\",class=\"sheddable\"} 2",
        )
        .await;
    });
    let bad = Classes::parse("eviction = \"some\"")
        .expect_err("unknown")
        .to_string();
    assert!(bad.contains("eviction") || bad.contains("some"), "{bad}");
}

/// Tenants `a` and `b`, named in this order (so `a` has the lower index and wins ties), and
/// the headers of their requests.
const TENANTS_A_B: &str = "[tenants.a]\nweight = 1\n[tenants.b]\nweight = 1\n";
const A: &[(&str, &str)] = &[(TENANT_HEADER, "a")];
const B: &[(&str, &str)] = &[(TENANT_HEADER, "b")];

/// Tenant `tenant`'s output tokens in `/metrics` at `addr`.
async fn tenant_tokens(addr: std::net::SocketAddr, tenant: &str) -> u64 {
    let (_, metrics) = get(addr, "/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    let prefix = format!(
        "xsched_gateway_tenant_output_tokens_total{{policy=\"fcfs\",tenant=\"{tenant}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Read `body` until `events` more server-sent events have passed.
async fn read_events(body: &mut hyper::body::Incoming, events: usize) {
    use http_body_util::BodyExt;
    let mut seen = 0;
    while seen < events {
        let frame = body
            .frame()
            .await
            .expect("the stream goes on")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            seen += data.windows(7).filter(|w| w == b"data: {").count();
        }
    }
}

#[test]
fn a_tenant_is_charged_for_a_stream_as_it_passes_and_for_one_its_client_left() {
    let (rt, gw, seen) = with_classes(TENANTS_A_B, 1);
    let addr = gw.addr();
    rt.block_on(async {
        // Tenant a's stream of 200 events holds the one slot.
        let answer = open_with(addr, CHAT, chat("long", 4_000, true), A).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let mut body = answer.into_body();
        read_events(&mut body, 1).await;
        // Each tenant queues one more: b first (lifted to a's counter as it was then), then a.
        let b = tokio::spawn(post_with(addr, CHAT, chat("b1", 0, false), B));
        until("b waits", || gw.arrivals() == 2).await;
        let a = tokio::spawn(post_with(addr, CHAT, chat("a2", 0, false), A));
        until("a waits", || gw.arrivals() == 3).await;
        // 40 more of a's tokens pass, and show in its served tokens before the stream ends.
        read_events(&mut body, 40).await;
        assert!(
            tenant_tokens(addr, "a").await >= 32,
            "a stream's tokens are counted as they pass"
        );
        // Its client leaves mid-stream: what passed is charged, so b is served first (charged
        // only at a stream's end, a's cut stream would never be, and a2 would go first).
        drop(body);
        assert_eq!(b.await.expect("task").0, StatusCode::OK);
        assert_eq!(a.await.expect("task").0, StatusCode::OK);
        assert!(tenant_tokens(addr, "a").await >= 41);
    });
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["long", "b1", "a2"]);
}

/// A prompt estimated from its characters misses the chat template's tokens: the prompt tokens
/// the engine reports in the answer's `usage` are what its tenant is charged.
#[test]
fn a_tenant_is_charged_the_prompt_tokens_its_engine_counted() {
    let (rt, gw, seen) = with_classes(TENANTS_A_B, 1);
    let addr = gw.addr();
    rt.block_on(async {
        // Tenant a's "hi" is estimated at one token; the engine will count 5 000.
        let mut body: serde_json::Value =
            serde_json::from_str(&chat("hold", 0, false)).expect("json");
        body["answer_tokens"] = 0.into();
        body["prompt_tokens"] = 5_000.into();
        let held = tokio::spawn(post_with(addr, CHAT, body.to_string(), A));
        until("hold reaches the engine", || {
            !seen.order.lock().expect("order").is_empty()
        })
        .await;
        // Each tenant queues one more: b first (lifted to a's counter), then a (tied with b).
        let b = tokio::spawn(post_with(addr, CHAT, chat("b1", 0, false), B));
        until("b waits", || gw.arrivals() == 2).await;
        let a = tokio::spawn(post_with(addr, CHAT, chat("a2", 0, false), A));
        until("a waits", || gw.arrivals() == 3).await;
        seen.gate.add_permits(1);
        for t in [held, b, a] {
            assert_eq!(t.await.expect("task").0, StatusCode::OK);
        }
    });
    // On the estimate the two tie and a, the lower tenant, would go first.
    let order = seen.order.lock().expect("order").clone();
    assert_eq!(order, ["hold", "b1", "a2"]);
}

/// Under eviction `one` (the default), no sheddable request joins an engine while a critical
/// request there waits for its first token (their prompts would be prefilled in one batch): a
/// freed slot waits for that token, then takes the sheddable request.
#[test]
fn a_sheddable_request_waits_for_a_critical_ones_first_token() {
    let (rt, gw, seen) = with_classes("", 2);
    let addr = gw.addr();
    let at_engine = || seen.order.lock().expect("order").len();
    rt.block_on(async {
        // A sheddable request (until a permit) and a critical stream whose first token comes
        // after 1.5 s hold the two slots.
        let sheddable = hold(addr, &seen, SHEDDABLE).await;
        let mut body: serde_json::Value =
            serde_json::from_str(&chat("critical", 200, true)).expect("json");
        body["first_ms"] = 1_500.into();
        let critical = tokio::spawn(post_with(addr, CHAT, body.to_string(), CRITICAL));
        until("the critical stream reaches the engine", || {
            at_engine() == 2
        })
        .await;
        let later = tokio::spawn(post_with(addr, CHAT, chat("later", 0, false), SHEDDABLE));
        until("the later sheddable request waits", || gw.arrivals() == 3).await;
        // The sheddable request ends: its slot stays free while the critical one has no token.
        seen.gate.add_permits(1);
        assert_eq!(sheddable.await.expect("task").0, StatusCode::OK);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(at_engine(), 2, "no sheddable request beside a prefill");
        assert!(!critical.is_finished());
        // Its first token lets the waiting one in.
        until("the later request reaches the engine", || at_engine() == 3).await;
        assert_eq!(later.await.expect("task").0, StatusCode::OK);
        assert_eq!(critical.await.expect("task").0, StatusCode::OK);
    });
}

/// While critical requests are about, streamed sheddable requests are prefilled one at a time:
/// the gateway counts their events, so a second one goes to the engine only once the first
/// one's first token has passed.
#[test]
fn streamed_sheddable_requests_go_to_the_engine_one_prefill_at_a_time() {
    let (rt, gw, seen) = with_classes("", 4);
    let addr = gw.addr();
    let at_engine = || seen.order.lock().expect("order").len() - 1;
    rt.block_on(async {
        let (status, _, _) = post_with(addr, CHAT, chat("critical", 0, false), CRITICAL).await;
        assert_eq!(status, StatusCode::OK);
        let mut body: serde_json::Value =
            serde_json::from_str(&chat("first", 200, true)).expect("json");
        body["first_ms"] = 1_000.into();
        let first = tokio::spawn(post_with(addr, CHAT, body.to_string(), SHEDDABLE));
        until("the first stream reaches the engine", || at_engine() == 1).await;
        let second = tokio::spawn(post_with(addr, CHAT, chat("second", 100, true), SHEDDABLE));
        until("the second request waits", || gw.arrivals() == 3).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            at_engine(),
            1,
            "a free slot, but the first prompt is still prefilled"
        );
        until("the second request reaches the engine", || at_engine() == 2).await;
        assert_eq!(first.await.expect("task").0, StatusCode::OK);
        assert_eq!(second.await.expect("task").0, StatusCode::OK);
    });
}

/// The same classed sequence through the gateway and through the simulator: two sheddable
/// requests hold an engine of two slots, a standard one waits, then two critical ones arrive,
/// each evicting the sheddable request admitted last. Both drivers run the core's eviction, so
/// both admit in the same order and evict the same requests in the same order.
#[test]
fn the_gateway_and_the_simulator_admit_and_evict_a_classed_sequence_alike() {
    use xsched_llm::engine::EngineConfig;
    use xsched_llm::sim::{Cluster, Rules, Runs};
    use xsched_llm_core::{Eviction, Fairness};
    use xsched_llm_predict::embedding::{Embedder, Hashed};

    let names = ["s0", "s1", "s2", "c3", "c4"];
    let (rt, gw, seen) = with_classes("", 2);
    let addr = gw.addr();
    let through_gateway_evicted = rt.block_on(async {
        let s0 = hold(addr, &seen, SHEDDABLE).await;
        let s1 = hold(addr, &seen, SHEDDABLE).await;
        let s2 = tokio::spawn(post(addr, CHAT, chat("s2", 0, false)));
        until("s2 waits", || gw.arrivals() == 3).await;
        let mut evicted = Vec::new();
        // c3 answers for 2 s, so that it still holds its slot when c4 arrives.
        let c3 = tokio::spawn(post_with(addr, CHAT, chat("c3", 2_000, false), CRITICAL));
        let (status, _, _) = s1.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        evicted.push("s1");
        assert!(!s0.is_finished(), "one evicted for c3");
        let c4 = tokio::spawn(post_with(addr, CHAT, chat("c4", 0, false), CRITICAL));
        let (status, _, _) = s0.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        evicted.push("s0");
        for t in [c3, c4] {
            assert_eq!(t.await.expect("task").0, StatusCode::OK);
        }
        assert_eq!(s2.await.expect("task").0, StatusCode::OK);
        seen.gate.add_permits(2);
        evicted
    });
    let order = seen.order.lock().expect("order").clone();
    let through_gateway: Vec<&str> = order
        .iter()
        .map(|t| if t == "hold" { "s" } else { t.as_str() })
        .collect();
    // Through the simulator: the sheddable requests answer long, the others briefly.
    let outputs = [2000, 2000, 20, 20, 20];
    let requests: Vec<xsched_llm::Request> = names
        .iter()
        .zip(outputs)
        .enumerate()
        .map(|(id, (name, output_tokens))| xsched_llm::Request {
            id,
            arrival: 0.01 * id as f64,
            prompt: name.to_string(),
            input_tokens: 10,
            output_tokens,
            previous_answer_tokens: None,
            embedding: Hashed.embed(name),
        })
        .collect();
    let cfg = EngineConfig {
        max_num_seqs: 2,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let runs = Runs {
        cfg: &cfg,
        cluster: Cluster::SINGLE,
        history: 100,
        warm: &[],
    };
    let rules = Rules {
        fairness: Fairness::with_eviction(Eviction::One),
        classes: vec![-1, -1, 0, 100, 100],
        ..Rules::default()
    };
    let run = runs
        .simulate(policy("fcfs"), &rules, &requests)
        .expect("run");
    let name = |i: usize| if i < 2 { "s" } else { names[i] };
    let through_simulator: Vec<&str> = run.admitted.iter().map(|&i| name(i)).collect();
    assert_eq!(through_gateway, through_simulator);
    assert_eq!(through_gateway, ["s", "s", "c3", "c4", "s2"]);
    let evicted: Vec<&str> = run.evicted.iter().map(|&i| names[i]).collect();
    assert_eq!(through_gateway_evicted, evicted);
}

/// The serving script (`support::SCRIPT`) through the gateway: engine A's metrics say it
/// queues, so the first request goes to B and the rest wait or are refused for the core's
/// reasons (a tenant at its limit, a sheddable request displaced from the full queue, the full
/// queue); A's metrics clear and the waiting requests go there. The same decisions as the
/// simulator's, fed the same scrapes (and the endpoint picker's, in `epp.rs`).
#[test]
fn the_gateway_and_the_simulator_decide_the_serving_script_alike() {
    let rt = runtime();
    let (a, seen_a) = start_engine(&rt);
    let (b, seen_b) = start_engine(&rt);
    *seen_a.metrics.lock().expect("page") = queueing(1);
    *seen_b.metrics.lock().expect("page") = queueing(0);
    let gw = serve(GatewayConfig {
        classes: Arc::new(Classes::parse(SCRIPT_CLASSES).expect("valid")),
        max_waiting: 2,
        scrape: Some(std::time::Duration::from_millis(20)),
        ..config(&[a, b], 1)
    });
    let addr = gw.addr();
    let refused = rt.block_on(async {
        let page =
            || async { String::from_utf8_lossy(&get(addr, "/metrics").await.1).into_owned() };
        while !reported_waiting(&page().await, a, 1) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let mut tasks = Vec::new();
        for (tag, tenant, class) in SCRIPT {
            let headers = script_headers(tenant, class);
            let before = gw.arrivals();
            let task = tokio::spawn(async move {
                let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                post_with(addr, CHAT, chat(tag, 0, false), &h).await
            });
            // Settled: refused at once, or counted (waiting or admitted).
            until(tag, || task.is_finished() || gw.arrivals() > before).await;
            if tag == "hold" {
                until("hold on its engine", || {
                    seen_b.order.lock().expect("o").len() == 1
                })
                .await;
            }
            tasks.push((tag, task));
        }
        *seen_a.metrics.lock().expect("page") = queueing(0);
        until("two served on A", || {
            seen_a.order.lock().expect("o").len() == 2
        })
        .await;
        seen_b.gate.add_permits(1);
        let mut refused = Vec::new();
        for (tag, task) in tasks {
            let (status, headers, _) = task.await.expect("task");
            if let Some(reason) = headers.get(xsched_gateway::error::SHED_REASON) {
                let reason = reason.to_str().expect("ascii").to_string();
                refused.push((tag.to_string(), reason));
            } else {
                assert_eq!(status, StatusCode::OK, "{tag}");
            }
        }
        refused
    });
    let mut decided: std::collections::BTreeMap<String, String> = refused.into_iter().collect();
    for (engine, seen) in [("A", &seen_a), ("B", &seen_b)] {
        for tag in seen.order.lock().expect("order").iter() {
            decided.insert(tag.clone(), engine.to_string());
        }
    }
    assert_eq!(decided, simulated_decisions());
    assert_eq!(decided, script_decided());
}
