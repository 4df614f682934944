//! `xsched llm serve`: the OpenAI-compatible gateway (`xsched_gateway`) in the foreground.

use crate::embedding_arg::EmbeddingArgs;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use xsched_gateway::forecast::SeedAnswer;
use xsched_gateway::upstream::Uri;
use xsched_gateway::{Epp, Gateway, GatewayConfig, RequestPolicySpec, Router};
use xsched_llm_core::EngineOrder;

/// Where requests are put in the policy's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrderAt {
    /// In the gateway's own queue: requests wait there and are sent as engines have room
    /// (--concurrency, the engines' metrics).
    Gateway,
    /// In each engine's own queue: every request is sent at once with the policy's number in
    /// `priority` (start vLLM with --scheduling-policy priority); the gateway bounds only what
    /// an engine holds (--engine-holds).
    Engine,
}

/// `xsched llm serve`'s arguments.
#[derive(Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// The engines, comma-separated (`http://127.0.0.1:8080`).
    #[arg(long, value_delimiter = ',', required = true)]
    upstream: Vec<Uri>,
    /// The policy (xsched-llm-core's, as in `xsched llm`): fcfs; priority; sagesched (the
    /// Gittins index of the predicted cost O²/2 + I·O, the predictor learning online from the
    /// engines' answers, with the aging guard); sagesched-time (the same over the predicted
    /// time on the engine, a·I + b·O with both rates measured from streamed answers: for
    /// engines that serve one request at a time, like llama-cpp-python's server); ssjf and the
    /// sagesched ablations; srpt-oracle and sagesched-oracle order by each request's stated
    /// length (`ignore_eos` with `max_tokens`, as benchmarks send: the ceiling of ordering, for
    /// measurement; a request stating none gets a 400). Policies that pause running requests or
    /// order by noisy samples of the truth are simulation-only.
    #[arg(long, default_value = "fcfs", value_parser = policy)]
    policy: RequestPolicySpec,
    /// Which engine a request goes to among those with a free slot: round-robin,
    /// least-outstanding (fewest in flight), kv-score, cost-aware (least predicted cost in
    /// flight) or prefix-affinity (where most of the prompt's prefix was sent: a conversation's
    /// turns meet their prompt cache).
    #[arg(long, default_value = "least-outstanding", value_parser = router)]
    router: Router,
    /// Each engine's KV capacity in tokens, if known: the sagesched policies then admit a
    /// request only while the predicted KV of what runs there fits (expected-peak admission).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    kv_tokens: Option<u64>,
    #[command(flatten)]
    embedding: EmbeddingArgs,
    /// Answers the predictor's history holds (oldest forgotten first).
    #[arg(long, default_value_t = xsched_gateway::forecast::HISTORY as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    history: u64,
    /// Recorded answers the predictor learns before the first request: JSON lines with `prompt`
    /// and `output_tokens` (what `scripts/llm/long-answers.py` and `vllm-bench.py` write), so
    /// it predicts from the start without sending them through an engine.
    #[arg(long, value_name = "FILE")]
    history_from: Option<PathBuf>,
    /// Requests in flight per engine at most (set it to the engine's own slots, e.g. llama.cpp
    /// server's --parallel).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Requests waiting in the gateway at most; past it a request gets a 429 at once.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    max_queue: u64,
    /// Seconds an engine may take to send an answer's head (a 504 after; a complete answer
    /// comes whole, so this bounds a whole non-streamed generation). An engine that times out
    /// or refuses is ejected for a backoff (1 s doubling to 30 s), then probed back. With
    /// --order-at engine a request also waits in the engine's own queue: an engine that sends
    /// no head until it runs a request needs this above the longest wait there (vLLM sends a
    /// stream's head at once).
    #[arg(long, default_value_t = xsched_gateway::upstream::TIMEOUTS.first_byte.as_secs_f64(),
          value_parser = seconds)]
    first_byte_timeout: f64,
    /// Seconds an engine may fall silent mid-answer (a stream then ends with an error event),
    /// unless within this time its metrics said requests wait in its own queue and its token
    /// counter moved: the answer then waits its turn there (vLLM's, with --order-at engine).
    #[arg(long, default_value_t = xsched_gateway::upstream::TIMEOUTS.idle.as_secs_f64(),
          value_parser = seconds)]
    idle_timeout: f64,
    /// Seconds a client may take to send a request's headers, and then its body (a 408 after;
    /// the endpoint picker: from a request's headers to its body's end).
    #[arg(long, default_value_t = xsched_gateway::config::CLIENT_TIMEOUT.as_secs_f64(),
          value_parser = seconds)]
    client_timeout: f64,
    /// Client connections at once at most (lowered to what the descriptor limit allows; at the
    /// cap the oldest idle connection is closed for a new one).
    #[arg(long, default_value_t = xsched_gateway::server::MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// A TOML file naming priority classes, tenants, their weights and limits (the defaults
    /// need none: classes `critical` 100, `standard` 0, `sheddable` -1; see
    /// docs/guides/llm-gateway.md#classes-tenants-and-deadlines).
    #[arg(long, value_name = "FILE")]
    classes: Option<PathBuf>,
    /// Seconds between reads of each engine's metrics and slots (vLLM's, llama.cpp's, SGLang's
    /// names): admission keeps within an engine's slots, and an engine that queues requests
    /// itself, or whose metrics went stale, is sent nothing until they clear.
    #[arg(long, default_value_t = xsched_gateway::engines::SCRAPE_INTERVAL.as_secs_f64(),
          value_parser = seconds)]
    engine_metrics_interval: f64,
    /// Never read engines' metrics (`--concurrency` alone bounds admission).
    #[arg(long)]
    no_engine_metrics: bool,
    /// Learn each engine's concurrency from its throughput instead of always admitting
    /// --concurrency: the fewest requests in flight whose output tokens per second are within
    /// 5 % of the best measured, between 1 and --concurrency (or the engine's slots, when
    /// lower). It starts at the most and measures only while requests wait in the gateway.
    #[arg(long)]
    learn_concurrency: bool,
    /// Where the policy's order acts: `gateway` (the gateway's queue) or `engine` (vLLM's own
    /// priority queue, each request numbered: a virtual deadline that ages, the class first;
    /// an engine that refuses numbers is ordered in the gateway's queue again, with a warning).
    #[arg(long, value_enum, default_value = "gateway")]
    order_at: OrderAt,
    /// With --order-at engine: requests sent to one engine and not done, at most (running and
    /// waiting there); past it they wait in the gateway.
    #[arg(long, default_value_t = EngineOrder::default().holds as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    engine_holds: u64,
    /// With --order-at engine: seconds by which a request the policy ranks last may be passed
    /// by requests arriving after it (its number ages by this; see
    /// docs/guides/llm-gateway.md#ordering-in-vllms-own-queue).
    #[arg(long, default_value_t = EngineOrder::default().horizon_s, value_parser = seconds)]
    engine_horizon: f64,
}

pub(crate) fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "`{s}`: expected seconds, more than 0 and at most 86400"
        )),
    }
}

fn policy(s: &str) -> Result<RequestPolicySpec, String> {
    s.parse()
        .map_err(|e: xsched_llm_core::policy::PolicyError| e.to_string())
}

fn router(s: &str) -> Result<Router, String> {
    s.parse()
        .map_err(|e: xsched_llm_core::route::UnknownRouter| e.to_string())
}

/// The gateway's configuration from its arguments (the endpoint picker's too).
fn gateway_config(a: &ServeArgs) -> Result<GatewayConfig> {
    Ok(GatewayConfig {
        listen: a.listen,
        upstreams: a.upstream.clone(),
        policy: a.policy,
        concurrency: usize::try_from(a.concurrency).unwrap_or(usize::MAX),
        kv_tokens: a.kv_tokens,
        max_waiting: usize::try_from(a.max_queue).unwrap_or(usize::MAX),
        router: a.router,
        embedder: Some(a.embedding.embedder()?),
        history: usize::try_from(a.history).unwrap_or(usize::MAX),
        history_seed: match &a.history_from {
            Some(path) => xsched_llm::recorded::read(path)?
                .into_iter()
                .map(|r| SeedAnswer {
                    prompt: r.prompt,
                    output_tokens: r.output_tokens,
                })
                .collect(),
            None => Arc::from([]),
        },
        timeouts: xsched_gateway::upstream::Timeouts {
            first_byte: Duration::from_secs_f64(a.first_byte_timeout),
            idle: Duration::from_secs_f64(a.idle_timeout),
        },
        max_connections: usize::try_from(a.max_connections).unwrap_or(usize::MAX),
        client_timeout: Duration::from_secs_f64(a.client_timeout),
        scrape: (!a.no_engine_metrics).then(|| Duration::from_secs_f64(a.engine_metrics_interval)),
        learn_concurrency: a.learn_concurrency,
        engine_order: (a.order_at == OrderAt::Engine).then(|| EngineOrder {
            holds: usize::try_from(a.engine_holds).unwrap_or(usize::MAX),
            horizon_s: a.engine_horizon,
        }),
        classes: Arc::new(match &a.classes {
            Some(path) => xsched_gateway::classes::Classes::load(path)?,
            None => xsched_gateway::classes::Classes::default(),
        }),
    })
}

/// The engines, as the start-up line names them.
fn upstreams(a: &ServeArgs) -> String {
    let names: Vec<String> = a.upstream.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// `xsched llm epp`'s arguments: the gateway's, and where its metrics are served.
#[derive(Args)]
pub struct EppArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Serve the Prometheus metrics (the gateway's: queue wait, TTFT, TTLT, the predictor,
    /// the engines) over HTTP at this address (e.g. 127.0.0.1:9090).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
}

/// `xsched llm epp`: the gateway's decisions as an Envoy ext_proc endpoint picker, until killed.
pub fn epp(e: &EppArgs) -> Result<()> {
    let a = &e.serve;
    let mut bound = Epp::bind(gateway_config(a)?)
        .with_context(|| format!("starting the endpoint picker on {}", a.listen))?;
    if let Some(addr) = e.metrics_addr {
        let at =
            (bound.with_metrics(addr)).with_context(|| format!("serving metrics on {addr}"))?;
        eprintln!("metrics at http://{at}/metrics");
    }
    let epp = bound.spawn().context("serving")?;
    eprintln!(
        "xsched endpoint picker (Envoy ext_proc, gRPC) on {} for {} (policy {}, router {}, {} in flight per engine)",
        epp.addr(),
        upstreams(a),
        a.policy,
        a.router,
        a.concurrency,
    );
    epp.wait();
    Ok(())
}

/// Serve until killed.
pub fn serve(a: &ServeArgs) -> Result<()> {
    let gateway = Gateway::bind(gateway_config(a)?)
        .with_context(|| format!("starting the gateway on {}", a.listen))?
        .spawn()
        .context("serving")?;
    eprintln!(
        "xsched gateway on http://{} -> {} (policy {}, router {}, {}{} in flight per engine{})",
        gateway.addr(),
        upstreams(a),
        a.policy,
        a.router,
        if a.learn_concurrency {
            "learned, at most "
        } else {
            ""
        },
        a.concurrency,
        if a.order_at == OrderAt::Engine {
            format!(
                "; ordered in the engines' queues, at most {} held by each",
                a.engine_holds
            )
        } else {
            String::new()
        }
    );
    gateway.wait();
    Ok(())
}
