//! The endpoint picker driven as Envoy drives it, without Envoy: Envoy's own generated
//! `ext_proc` client (envoy-types) over real gRPC streams, message for message as Envoy sends
//! them in `FULL_DUPLEX_STREAMED` mode (request headers, body chunks, end of stream, response
//! headers and body, resets), and the gRPC health services a proxy checks.

mod support;

use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, ProcessingRequest, ProcessingResponse, body_mutation::Mutation,
    processing_request::Request, processing_response::Response,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{
    ARRIVAL_ORDER, chat, config, learned_in, policy, runtime, sequence, simulated_order, until,
    with_tokens,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use xsched_gateway::epp::messages::{
    DESTINATION, REASON, SUBSET_KEY, SUBSET_NAMESPACE, http_headers,
};
use xsched_gateway::{Epp, GatewayConfig, RunningEpp};

/// One request's stream, as Envoy holds it.
struct Stream {
    tx: mpsc::Sender<ProcessingRequest>,
    rx: tonic::Streaming<ProcessingResponse>,
}

impl Stream {
    async fn open(addr: SocketAddr) -> Stream {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}"))
            .await
            .expect("connect");
        let (tx, out) = mpsc::channel(16);
        let rx = client
            .process(ReceiverStream::new(out))
            .await
            .expect("a stream")
            .into_inner();
        Stream { tx, rx }
    }

    async fn send(&self, request: Request, metadata: Option<Metadata>) {
        let message = ProcessingRequest {
            request: Some(request),
            metadata_context: metadata,
            ..ProcessingRequest::default()
        };
        self.tx.send(message).await.expect("the picker listens");
    }

    /// A completion's headers then its body in two chunks, the second ending the stream.
    async fn request(&self, body: &str, headers: &[(&str, &str)], metadata: Option<Metadata>) {
        let mut all = vec![(":method", "POST"), (":path", "/v1/chat/completions")];
        all.extend_from_slice(headers);
        self.send(Request::RequestHeaders(http_headers(&all, false)), metadata)
            .await;
        let (a, b) = body.as_bytes().split_at(body.len() / 2);
        self.send(Request::RequestBody(http_body(a, false)), None)
            .await;
        self.send(Request::RequestBody(http_body(b, true)), None)
            .await;
    }

    async fn next(&mut self) -> ProcessingResponse {
        tokio::time::timeout(Duration::from_secs(30), self.rx.message())
            .await
            .expect("an answer within 30 s")
            .expect("no gRPC error")
            .expect("the stream goes on")
    }

    /// A request tagged `tag`, placed: its endpoint named and its body back.
    async fn placed(addr: SocketAddr, tag: &str) -> Stream {
        let mut s = Stream::open(addr).await;
        s.request(&chat(tag, 10, false), &[], None).await;
        s.endpoint().await;
        s.body().await;
        s
    }

    /// The endpoint named in the header, after checking the metadata names the same.
    async fn endpoint(&mut self) -> String {
        let r = self.next().await;
        endpoint_of(&r)
    }

    /// The endpoint placed at, or the core's reason for refusing the request.
    async fn decided(&mut self) -> Result<String, String> {
        let r = self.next().await;
        let Some(Response::ImmediateResponse(i)) = &r.response else {
            return Ok(endpoint_of(&r));
        };
        let headers = &i.headers.as_ref().expect("headers").set_headers;
        let shed = (headers.iter().filter_map(|h| h.header.as_ref()))
            .find(|h| h.key == xsched_gateway::error::SHED_REASON)
            .map(|h| String::from_utf8_lossy(&h.raw_value).to_string());
        Err(shed.expect("the core's reason"))
    }

    /// The body passed back, to its end.
    async fn body(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let r = self.next().await;
            let (Some(Response::RequestBody(b)) | Some(Response::ResponseBody(b))) = &r.response
            else {
                panic!("a body chunk: {r:?}");
            };
            let m = b.response.as_ref().and_then(|c| c.body_mutation.as_ref());
            let Some(Mutation::StreamedResponse(s)) = m.and_then(|m| m.mutation.as_ref()) else {
                panic!("a streamed body: {r:?}");
            };
            body.extend_from_slice(&s.body);
            if s.end_of_stream {
                return body;
            }
        }
    }

    /// The immediate response's status and reason.
    async fn refused(&mut self) -> (i32, String) {
        let r = self.next().await;
        let Some(Response::ImmediateResponse(i)) = &r.response else {
            panic!("an immediate response: {r:?}");
        };
        let headers = &i.headers.as_ref().expect("headers").set_headers;
        let reason = (headers.iter().filter_map(|h| h.header.as_ref()))
            .find(|h| h.key == REASON)
            .map(|h| String::from_utf8_lossy(&h.raw_value).to_string());
        (
            i.status.as_ref().map_or(0, |s| s.code),
            reason.expect("a reason"),
        )
    }

    /// The engine's answer passing back: headers, one body chunk ending it.
    async fn answer(&mut self, text: &str) {
        self.send(
            Request::ResponseHeaders(http_headers(&[(":status", "200")], false)),
            None,
        )
        .await;
        let r = self.next().await;
        assert!(
            matches!(r.response, Some(Response::ResponseHeaders(_))),
            "{r:?}"
        );
        self.send(
            Request::ResponseBody(http_body(text.as_bytes(), true)),
            None,
        )
        .await;
        assert_eq!(self.body().await, text.as_bytes());
    }
}

/// The endpoint a response names in the header, after checking the metadata names the same.
fn endpoint_of(r: &ProcessingResponse) -> String {
    let Some(Response::RequestHeaders(h)) = &r.response else {
        panic!("an endpoint first: {r:?}");
    };
    let set = &h
        .response
        .as_ref()
        .expect("common")
        .header_mutation
        .as_ref()
        .expect("set");
    let header = set.set_headers[0].header.as_ref().expect("header");
    assert_eq!(header.key, DESTINATION);
    let value = String::from_utf8(header.raw_value.clone()).expect("utf-8");
    let lb = &r.dynamic_metadata.as_ref().expect("metadata").fields["envoy.lb"];
    let Some(Kind::StructValue(lb)) = &lb.kind else {
        panic!("envoy.lb: {lb:?}");
    };
    assert_eq!(
        lb.fields[DESTINATION].kind,
        Some(Kind::StringValue(value.clone()))
    );
    value
}

/// The proxy's subset hint: `endpoints`, one comma-separated string.
fn subset_hint(endpoints: &str) -> Metadata {
    let hint = Value {
        kind: Some(Kind::StringValue(endpoints.into())),
    };
    let fields = [(SUBSET_KEY.to_string(), hint)].into();
    Metadata {
        filter_metadata: [(SUBSET_NAMESPACE.to_string(), Struct { fields })].into(),
        ..Metadata::default()
    }
}

fn http_body(bytes: &[u8], end_of_stream: bool) -> HttpBody {
    HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    }
}

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
    // The gateway's own test (`gateway.rs`) checks it against the same simulated order.
    assert_eq!(order, simulated_order(&prompts, &ARRIVAL_ORDER));
}

/// The serving script (`support::SCRIPT`) through the picker, which scrapes the two fake
/// engines' metrics as the gateway does: the same endpoints and the same refusals, for the
/// same reasons, as the simulator's and the gateway's (`classes.rs`).
#[test]
fn the_picker_and_the_simulator_decide_the_serving_script_alike() {
    use support::{
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
