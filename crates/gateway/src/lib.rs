//! # xsched-gateway
//!
//! `xsched llm serve`: an OpenAI-compatible gateway in front of unchanged inference engines
//! (llama.cpp's server, vLLM, SGLang). The gateway is where a request can still be ordered: it
//! holds requests in its own queue and admits them to each upstream engine up to a concurrency
//! limit, in the policy's order, passing requests and responses (streamed or not) through
//! unchanged apart from that.
//!
//! - [`request`]: what is checked of a request before it is queued (a 400 names the field).
//! - [`order`]: the policy (`fcfs`, `sagesched`, `sagesched-time`) and the predictor it learns
//!   online.
//! - [`admission`]: the queue and the upstream slots (bounded: a 429 past the bound), with the
//!   starvation guard.
//! - [`route`]: which upstream a request goes to (round-robin, least-outstanding, cost-aware).
//! - [`tally`]: an answer's tokens, counted as it passes, for the predictor.
//! - [`proxy`]: forwarding to an upstream and streaming its answer back; the slot is freed when
//!   the answer ends or the client goes away.
//! - [`server`]: the HTTP front and the configuration.
//! - [`metrics`]: Prometheus histograms of queue wait, TTFT and TTLT at `GET /metrics`.
//! - [`load`]: `xsched llm load`, an open-loop load generator for any OpenAI-compatible server.
//!

pub mod admission;
pub mod load;
pub mod metrics;
pub mod order;
pub mod proxy;
pub mod request;
pub mod route;
pub mod server;
pub mod tally;

pub use order::Policy;
pub use route::Router;
pub use server::{Gateway, GatewayConfig, GatewayError, RunningGateway};
