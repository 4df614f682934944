//! # xsched-gateway
//!
//! `xsched llm serve`: an OpenAI-compatible gateway in front of unchanged inference engines
//! (llama.cpp's server, vLLM, SGLang). The gateway is where a request can still be ordered: it
//! holds requests in its own queue and admits them to each upstream engine up to a concurrency
//! limit, in the policy's order, passing requests and responses (streamed or not) through
//! unchanged apart from that.
//!
//! The scheduling itself (the queue, its orders, the aging guard, admission, routers) is
//! `xsched-llm-core`'s, the very code the engine simulator drives; the gateway keeps HTTP,
//! streaming and timers.
//!
//! - [`request`]: what is checked of a request before it is queued (a 400 names the field).
//! - [`classes`]: priority classes and tenants from headers, the body and a TOML file.
//! - [`forecast`]: what is predicted of a request's text (embedding, history, prompt tokens).
//! - [`admission`]: the core under a lock, and a waiter per queued request (bounded: a 429
//!   past the bound).
//! - [`health`]: upstreams that fail are ejected for a backoff and probed back.
//! - [`engines`]: each engine's metrics and slots, scraped (stale or queueing = saturated).
//! - [`body`]: a request body read within its bound (a clean 413 past it).
//! - [`conns`]: client connections under a cap below the descriptor limit.
//! - [`prefix`]: a prompt's block hashes, for the `prefix-affinity` router.
//! - [`tally`]: an answer's tokens, counted as it passes, for the predictor.
//! - [`proxy`]: forwarding to an upstream and streaming its answer back; the slot is freed when
//!   the answer ends or the client goes away; timeouts, and a retry on a fresh connection.
//! - [`server`]: the HTTP front and the configuration.
//! - [`metrics`]: Prometheus histograms of queue wait, TTFT and TTLT at `GET /metrics`.

pub mod admission;
pub mod body;
pub mod classes;
pub mod conns;
pub mod engines;
pub mod forecast;
pub mod health;
pub mod metrics;
pub mod prefix;
pub mod proxy;
pub mod request;
pub mod server;
pub mod tally;

pub use server::{Gateway, GatewayConfig, GatewayError, RunningGateway};
pub use xsched_llm_core::{RequestPolicySpec, Router};
