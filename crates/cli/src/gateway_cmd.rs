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
