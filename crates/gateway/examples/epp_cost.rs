//! The endpoint picker's own cost per request: the time from a request's last body chunk to the
//! picker's answer naming its endpoint (P50, P99), and the CPU its threads spend per request.
//! Driven as Envoy drives it (Envoy's generated client, one gRPC stream a request, one at a time)
//! against a pool nobody listens on (the picker never calls the engines, and its scrapers are
//! off), with room for every request, so nothing waits and what is timed is the picker itself.
//!
//! `cargo run --release -p xsched-gateway --example epp_cost -- [REQUESTS] [POLICY]`
//! (defaults: 2000 requests, fcfs; `sagesched` adds the length prediction).

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, ProcessingRequest, processing_request::Request,
};
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use xsched_gateway::epp::messages::http_headers;
use xsched_gateway::{Epp, GatewayConfig};

fn message(request: Request) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        ..ProcessingRequest::default()
    }
}

/// CPU time of this process's threads whose name starts with `prefix` (`/proc`, clock ticks).
fn cpu_of(prefix: &str) -> Duration {
    let ticks: u64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|n| n.starts_with(prefix))
        })
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let rest = stat.get(stat.rfind(')')? + 2..)?;
            let fields: Vec<&str> = rest.split(' ').collect();
            // utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .sum();
    Duration::from_secs_f64(ticks as f64 / USER_HZ)
}

/// The clock ticks of `/proc/*/stat` per second: Linux's USER_HZ, 100 on every architecture.
const USER_HZ: f64 = 100.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(2000), |a| a.parse())?;
    let policy = args.next().unwrap_or_else(|| "fcfs".into());
    let mut config = GatewayConfig::new(
        "127.0.0.1:0".parse()?,
        vec!["http://10.0.0.1:8000".parse()?],
        1 << 20,
    );
    config.scrape = None;
    config.policy = policy.parse()?;
    let epp = Epp::bind(config)?.spawn()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body = br#"{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"write a haiku about the sea"}]}"#;
    let (mut waits, cpu_before) = (Vec::with_capacity(n), cpu_of("xsched-epp"));
    rt.block_on(async {
        let mut client = ExternalProcessorClient::connect(format!("http://{}", epp.addr())).await?;
        for _ in 0..n {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let mut answers = client.process(ReceiverStream::new(rx)).await?.into_inner();
            let pairs = [(":method", "POST"), (":path", "/v1/chat/completions")];
            let headers = Request::RequestHeaders(http_headers(&pairs, false));
            tx.send(message(headers)).await?;
            let last = HttpBody {
                body: body.to_vec(),
                end_of_stream: true,
                ..HttpBody::default()
            };
            let sent = Instant::now();
            tx.send(message(Request::RequestBody(last))).await?;
            answers.message().await?.ok_or("no endpoint")?;
            waits.push(sent.elapsed());
            answers.message().await?.ok_or("no body")?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    let cpu = cpu_of("xsched-epp").saturating_sub(cpu_before);
    waits.sort();
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q).round() as usize];
    println!(
        "{n} requests, policy {policy}: endpoint after the body's end P50 {:.1} us, P99 {:.1} us; \
         picker CPU {:.1} us per request",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        cpu.as_secs_f64() * 1e6 / n as f64,
    );
    Ok(())
}
