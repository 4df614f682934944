//! The endpoint picker under 10 000 concurrent streams, as a proxy holding that many requests
//! would open them: each stream sends a whole completion and waits while the pool's one slot is
//! taken, so every request queues in the picker. Measured: how long the flood takes to be
//! queued, the process's resident memory before and after, a health check's and a fresh
//! request's answer times while it is queued (the fresh one is refused with a 429: the queue
//! holds its bound), the time for the flood to leave once the proxy resets its streams, and
//! that a request placed after it gets the slot at once. Envoy's generated client, over 50
//! HTTP/2 connections of 200 streams (hyper's default per-connection stream limit).
//!
//! `cargo run --release -p xsched-gateway --example epp_flood -- [STREAMS]` (default 10 000).

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, ProcessingRequest, ProcessingResponse, processing_request::Request,
    processing_response::Response,
};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use xsched_gateway::epp::messages::http_headers;
use xsched_gateway::{Epp, GatewayConfig};

type Client = ExternalProcessorClient<tonic::transport::Channel>;

/// One request's stream: what is sent on it, and its answers.
struct Open {
    _tx: mpsc::Sender<ProcessingRequest>,
    rx: tonic::Streaming<ProcessingResponse>,
}

fn message(request: Request) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        ..ProcessingRequest::default()
    }
}

/// Open a stream on `client` and send a whole completion tagged `tag` on it.
async fn open(client: &mut Client, tag: &str) -> Result<Open, tonic::Status> {
    let (tx, out) = mpsc::channel(4);
    let headers = [(":method", "POST"), (":path", "/v1/chat/completions")];
    let body =
        format!(r#"{{"model":"m","user":"{tag}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    let _ = tx
        .send(message(Request::RequestHeaders(http_headers(
            &headers, false,
        ))))
        .await;
    let _ = tx
        .send(message(Request::RequestBody(HttpBody {
            body: body.into_bytes(),
            end_of_stream: true,
            ..HttpBody::default()
        })))
        .await;
    let rx = client.process(ReceiverStream::new(out)).await?.into_inner();
    Ok(Open { _tx: tx, rx })
}

/// The process's resident memory (kB, `/proc/self/status`).
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// What the first answer on `s` is: an endpoint (`Ok`), or an immediate response's status.
async fn first_answer(s: &mut Open) -> Result<(), i32> {
    let r = tokio::time::timeout(Duration::from_secs(30), s.rx.message()).await;
    match r
        .ok()
        .and_then(|m| m.ok().flatten())
        .and_then(|m| m.response)
    {
        Some(Response::RequestHeaders(_)) => Ok(()),
        Some(Response::ImmediateResponse(i)) => Err(i.status.map_or(0, |s| s.code)),
        _ => Err(-1),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(10_000), |a| a.parse())?;
    let mut config = GatewayConfig::new(
        "127.0.0.1:0".parse()?,
        vec!["http://10.0.0.1:8000".parse()?],
        1,
    );
    config.scrape = None;
    config.max_waiting = n;
    let epp = Epp::bind(config)?.spawn()?;
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    client.block_on(flood(&epp, n))
}

/// Flood `epp` with `n` streams and measure (see the module docs).
async fn flood(
    epp: &xsched_gateway::RunningEpp,
    n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = format!("http://{}", epp.addr());
    let rss_before = rss_kb();
    let connections = n.div_ceil(200).max(1);
    let mut clients = Vec::new();
    for _ in 0..connections {
        clients.push(Client::connect(url.clone()).await?);
    }
    // The slot's holder, then the flood behind it.
    let mut holder = open(&mut clients[0], "holder").await?;
    first_answer(&mut holder)
        .await
        .map_err(|s| format!("holder: {s}"))?;
    let start = Instant::now();
    let mut flood = Vec::with_capacity(n);
    for i in 0..n {
        let client = &mut clients[i % connections];
        flood.push(open(client, &format!("f{i}")).await?);
    }
    while epp.arrivals() < n as u64 + 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let queued = start.elapsed();
    let rss_queued = rss_kb();
    let t = Instant::now();
    let channel = tonic::transport::Endpoint::from_shared(url.clone())?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.connect().await?);
    let service = "envoy.service.ext_proc.v3.ExternalProcessor".to_string();
    health
        .check(tonic_health::pb::HealthCheckRequest { service })
        .await?;
    let health_took = t.elapsed();
    let t = Instant::now();
    let mut fresh = open(&mut Client::connect(url.clone()).await?, "fresh").await?;
    let fresh_status = first_answer(&mut fresh).await.err();
    let fresh_took = t.elapsed();
    let t = Instant::now();
    drop(flood);
    while epp.load().0 > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let left = t.elapsed();
    drop(holder);
    let mut after = open(&mut clients[0], "after").await?;
    let t = Instant::now();
    let placed = first_answer(&mut after).await;
    println!(
        "streams {n} over {connections} connections: queued in {:.2} s; RSS {} -> {} MiB \
         ({:.1} KiB a waiting stream); health check {:.1} ms and a fresh request {:.1} ms \
         (status {:?}) while queued; the flood reset and gone in {:.2} s; the next request \
         placed: {} in {:.1} ms",
        queued.as_secs_f64(),
        rss_before / 1024,
        rss_queued / 1024,
        (rss_queued.saturating_sub(rss_before)) as f64 / n as f64,
        health_took.as_secs_f64() * 1e3,
        fresh_took.as_secs_f64() * 1e3,
        fresh_status,
        left.as_secs_f64(),
        placed.is_ok(),
        t.elapsed().as_secs_f64() * 1e3,
    );
    Ok(())
}
