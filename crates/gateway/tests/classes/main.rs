//! Classes and tenants through the gateway, in front of the fake engine: a higher class is
//! forwarded first, a sheddable request is shed with a 503 and `Retry-After` when too many of
//! its kind wait, a tenant over its limit gets a 429 naming it, a bad class or tenant header is
//! a 400 naming the header, and `/metrics` counts by class band and tenant.

#[path = "../support/mod.rs"]
mod support;

mod eviction;
mod parity;
mod tenants;

use hyper::StatusCode;
use std::sync::Arc;
use xsched_gateway::classes::{
    Classes, OBJECTIVE_HEADER, PRIORITY_HEADER, SLO_TTFT_HEADER, TENANT_HEADER,
};
use xsched_gateway::{GatewayConfig, RunningGateway};

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
