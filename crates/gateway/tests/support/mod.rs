//! What the gateway's tests share: a fake engine (an HTTP server in the test that records what
//! reaches it), a gateway in front of it, and a client.
#![allow(dead_code, unused_imports)] // each test binary uses its own part

mod client;
mod engine;
mod parity;

pub use client::*;
pub use engine::*;
pub use parity::*;

use std::net::SocketAddr;
use std::time::Duration;
use xsched_gateway::{Gateway, GatewayConfig, RequestPolicySpec, RunningGateway};

pub fn policy(name: &str) -> RequestPolicySpec {
    name.parse().expect("a known policy")
}

/// Wait (async) until `ok` holds, failing after 30 s.
pub async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub fn config(upstreams: &[SocketAddr], concurrency: usize) -> GatewayConfig {
    GatewayConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        upstreams
            .iter()
            .map(|a| format!("http://{a}").parse().expect("uri"))
            .collect(),
        concurrency,
    )
}

pub fn gateway(upstreams: &[SocketAddr], concurrency: usize, max_waiting: usize) -> RunningGateway {
    serve(GatewayConfig {
        max_waiting,
        ..config(upstreams, concurrency)
    })
}

pub fn serve(config: GatewayConfig) -> RunningGateway {
    Gateway::bind(config).expect("bind").spawn().expect("serve")
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
