//! Tenants' shares by tokens: a stream charged as it passes (and when its client leaves), and a
//! prompt charged as its engine counted it.

use crate::support::{chat, get, open_with, post_with, until};
use crate::{CHAT, with_classes};
use hyper::StatusCode;
use xsched_gateway::classes::TENANT_HEADER;

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
