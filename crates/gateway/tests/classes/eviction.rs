//! A higher class against running sheddable requests: evicted at once, or once waiting would
//! miss a TTFT deadline, one or all of them; and no sheddable prompt prefilled beside a
//! critical request's.

use crate::support::{chat, post, post_with, until};
use crate::{CHAT, CRITICAL, SHEDDABLE, hold, metrics_have, with_classes};
use hyper::StatusCode;
use xsched_gateway::classes::{Classes, OBJECTIVE_HEADER, SLO_TTFT_HEADER};

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
