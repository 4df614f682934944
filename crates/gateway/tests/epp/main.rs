//! The endpoint picker driven as Envoy drives it, without Envoy: Envoy's own generated
//! `ext_proc` client (envoy-types) over real gRPC streams, message for message as Envoy sends
//! them in `FULL_DUPLEX_STREAMED` mode (request headers, body chunks, end of stream, response
//! headers and body, resets), and the gRPC health services a proxy checks.

#[path = "../support/mod.rs"]
mod support;

mod parity;
mod stream;

use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use std::net::SocketAddr;
use std::time::Duration;
use stream::{Stream, http_body, subset_hint};
use support::{chat, config, policy, runtime, until};
use xsched_gateway::epp::messages::http_headers;
use xsched_gateway::{Epp, GatewayConfig, RunningEpp};

/// A picker for the pool `endpoints` (nothing listens there: the picker never calls them; its
/// scrapers are off), `concurrency` a slot each.
fn picker(
    endpoints: &[&str],
    concurrency: usize,
    tune: impl FnOnce(&mut GatewayConfig),
) -> RunningEpp {
    let addrs: Vec<SocketAddr> = endpoints.iter().map(|e| e.parse().expect("addr")).collect();
    let mut c = GatewayConfig {
        scrape: None,
        ..config(&addrs, concurrency)
    };
    tune(&mut c);
    Epp::bind(c).expect("bind").spawn().expect("serve")
}

#[test]
fn a_request_gets_its_endpoint_then_its_body_back_and_its_answer_passes_through() {
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000", "10.0.0.2:8000"], 1, |_| {});
    rt.block_on(async {
        let mut s = Stream::open(epp.addr()).await;
        let body = chat("a", 10, true);
        s.request(&body, &[("content-type", "application/json")], None)
            .await;
        let endpoints = s.endpoint().await;
        let first = endpoints.split(',').next().expect("one");
        assert!(
            ["10.0.0.1:8000", "10.0.0.2:8000"].contains(&first),
            "{endpoints}"
        );
        assert_eq!(
            endpoints.split(',').count(),
            2,
            "the other as fallback: {endpoints}"
        );
        assert_eq!(
            s.body().await,
            body.as_bytes(),
            "the body passes back unchanged"
        );
        s.answer("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
            .await;
    });
}

#[test]
fn while_every_engine_is_full_requests_wait_and_leave_in_the_policys_order() {
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000"], 1, |c| c.policy = policy("priority"));
    rt.block_on(async {
        let mut running = Stream::placed(epp.addr(), "running").await;
        let mut standard = Stream::open(epp.addr()).await;
        standard
            .request(&chat("standard", 10, false), &[], None)
            .await;
        until("the standard request waits", || epp.arrivals() == 2).await;
        let mut critical = Stream::open(epp.addr()).await;
        let objective = [("x-llm-d-inference-objective", "critical")];
        critical
            .request(&chat("critical", 10, false), &objective, None)
            .await;
        until("the critical request waits", || epp.arrivals() == 3).await;
        // The engine's one slot frees when the running answer ends: the critical request,
        // which came second, is placed first; the standard one only once that one ends too.
        running.answer("{}").await;
        assert_eq!(critical.endpoint().await, "10.0.0.1:8000");
        critical.body().await;
        critical.answer("{}").await;
        assert_eq!(standard.endpoint().await, "10.0.0.1:8000");
    });
}

#[test]
fn bad_input_gets_a_clear_status_and_a_reset_stream_stalls_nobody() {
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000"], 1, |c| c.max_waiting = 1);
    rt.block_on(async {
        let mut garbage = Stream::open(epp.addr()).await;
        garbage.request("this is not JSON", &[], None).await;
        let (status, reason) = garbage.refused().await;
        assert_eq!(status, 400, "{reason}");

        // Over the body bound (4 MiB), in 1 MiB chunks as a proxy streams it: refused as it
        // passes the bound, before its end.
        let mut big = Stream::open(epp.addr()).await;
        let headers = [(":method", "POST"), (":path", "/v1/chat/completions")];
        big.send(Request::RequestHeaders(http_headers(&headers, false)), None)
            .await;
        let mib = vec![b' '; 1 << 20];
        for _ in 0..5 {
            big.send(Request::RequestBody(http_body(&mib, false)), None)
                .await;
        }
        let (status, reason) = big.refused().await;
        assert_eq!(status, 413, "{reason}");

        let subset = subset_hint("10.9.9.9:8000");
        let mut elsewhere = Stream::open(epp.addr()).await;
        elsewhere
            .request(&chat("x", 10, false), &[], Some(subset))
            .await;
        let (status, reason) = elsewhere.refused().await;
        assert_eq!(status, 503, "{reason}");
        assert!(reason.contains("subset"), "{reason}");

        let mut running = Stream::placed(epp.addr(), "running").await;
        let gone = Stream::open(epp.addr()).await;
        gone.request(&chat("gone", 10, false), &[], None).await;
        until("it waits", || epp.arrivals() == 2).await;
        let mut full = Stream::open(epp.addr()).await;
        full.request(&chat("full", 10, false), &[], None).await;
        let (status, reason) = full.refused().await;
        assert_eq!(status, 429, "the queue holds its bound: {reason}");
        drop(gone); // Envoy resets the waiting stream
        running.answer("{}").await;
        let mut next = Stream::open(epp.addr()).await;
        next.request(&chat("next", 10, false), &[], None).await;
        assert_eq!(
            next.endpoint().await,
            "10.0.0.1:8000",
            "the reset one left its place"
        );
    });
}

/// A request the proxy limits to a subset is admitted by the core only there: it waits for
/// its endpoint's slot while another endpoint is free, and holds no slot elsewhere.
#[test]
fn a_subset_hint_is_honoured_by_the_core_and_takes_no_slot_elsewhere() {
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000", "10.0.0.2:8000"], 1, |_| {});
    rt.block_on(async {
        let second = || Some(subset_hint("10.0.0.2:8000"));
        let mut first = Stream::open(epp.addr()).await;
        first.request(&chat("a", 10, false), &[], second()).await;
        assert_eq!(first.endpoint().await, "10.0.0.2:8000");
        first.body().await;
        let mut waits = Stream::open(epp.addr()).await;
        waits.request(&chat("b", 10, false), &[], second()).await;
        until("it waits", || epp.arrivals() == 2).await;
        // The free endpoint is still free: a request without a hint is placed there at once.
        let free = Stream::placed(epp.addr(), "c").await;
        drop(free);
        first.answer("{}").await;
        assert_eq!(waits.endpoint().await, "10.0.0.2:8000");
    });
}

#[test]
fn the_health_services_a_proxy_checks_are_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000"], 1, |_| {});
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", epp.addr()))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut health = HealthClient::new(channel);
        for service in [
            "liveness",
            "readiness",
            "envoy.service.ext_proc.v3.ExternalProcessor",
        ] {
            let r = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .expect("checked")
                .into_inner();
            assert_eq!(r.status, ServingStatus::Serving as i32, "{service}");
        }
    });
}

/// A client that never ends its body gets a 408 at the client timeout, and one that goes away
/// mid-body leaves nothing behind; neither holds up a request beside it.
#[test]
fn a_body_that_never_ends_gets_a_408_and_one_cut_short_leaves_nothing() {
    let rt = runtime();
    let epp = picker(&["10.0.0.1:8000"], 1, |c| {
        c.client_timeout = Duration::from_millis(300);
    });
    rt.block_on(async {
        let headers = [(":method", "POST"), (":path", "/v1/chat/completions")];
        let mut endless = Stream::open(epp.addr()).await;
        endless
            .send(Request::RequestHeaders(http_headers(&headers, false)), None)
            .await;
        endless
            .send(Request::RequestBody(http_body(b"{\"model\":", false)), None)
            .await;
        let cut = Stream::open(epp.addr()).await;
        cut.send(Request::RequestHeaders(http_headers(&headers, false)), None)
            .await;
        cut.send(Request::RequestBody(http_body(b"{\"mod", false)), None)
            .await;
        drop(cut);
        // Beside them, a whole request is placed, answered, and frees the one slot.
        let mut beside = Stream::placed(epp.addr(), "beside").await;
        beside.answer("{}").await;
        let (status, reason) = endless.refused().await;
        assert_eq!(status, 408, "{reason}");
        assert!(reason.contains("did not end within 0.3 s"), "{reason}");
        let next = Stream::placed(epp.addr(), "next").await;
        drop(next);
        assert_eq!(epp.arrivals(), 2, "only the whole requests were placed");
    });
}

/// An endpoint whose metrics answered and then stop is stale after 3 s (llm-d's rule, the
/// core's `watch.rs`): it is sent nothing until they answer again.
#[test]
fn an_endpoint_whose_metrics_go_stale_is_sent_nothing_until_they_answer() {
    use support::{queueing, reported_waiting, start_engine};
    let rt = runtime();
    let (a, seen_a) = start_engine(&rt);
    let (b, seen_b) = start_engine(&rt);
    *seen_a.metrics.lock().expect("page") = queueing(0);
    *seen_b.metrics.lock().expect("page") = queueing(0);
    let endpoints = [a.to_string(), b.to_string()];
    let names: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let epp = picker(&names, 4, |c| c.scrape = Some(Duration::from_millis(20)));
    let first = |e: String| e.split(',').next().unwrap_or_default().to_string();
    rt.block_on(async {
        until("both scraped", || {
            let page = epp.metrics();
            reported_waiting(&page, a, 0) && reported_waiting(&page, b, 0)
        })
        .await;
        *seen_a.metrics.lock().expect("page") = None; // a 404 from now
        let stale = "xsched_gateway_upstream_metrics_stale";
        until("stale after 3 s", || {
            (epp.metrics().lines())
                .any(|l| l.starts_with(stale) && l.contains(&endpoints[0]) && l.ends_with(" 1"))
        })
        .await;
        for tag in ["x", "y", "z"] {
            let mut s = Stream::open(epp.addr()).await;
            s.request(&chat(tag, 10, false), &[], None).await;
            assert_eq!(
                first(s.endpoint().await),
                endpoints[1],
                "{tag}: not the stale one"
            );
            s.body().await;
            s.answer("{}").await;
        }
        *seen_a.metrics.lock().expect("page") = queueing(0);
        until("fresh again", || {
            (epp.metrics().lines())
                .any(|l| l.starts_with(stale) && l.contains(&endpoints[0]) && l.ends_with(" 0"))
        })
        .await;
        // Both idle: the least loaded, the first, is the fresh-again one.
        let mut s = Stream::open(epp.addr()).await;
        s.request(&chat("back", 10, false), &[], None).await;
        assert_eq!(first(s.endpoint().await), endpoints[0]);
    });
}
