//! # xsched-gateway
//!
//! `xsched llm serve`: an OpenAI-compatible gateway in front of unchanged inference engines
//! (llama.cpp's server, vLLM, SGLang). The gateway is where a request can still be ordered: it
//! holds requests in its own queue and admits them to each upstream engine up to a concurrency
//! limit, in the policy's order, passing requests and responses (streamed or not) through
//! unchanged apart from that.
//!
//! Every scheduling decision (the queue, its orders, the aging guard, admission, routers,
//! eviction for a higher class, learned concurrency) is `xsched-llm-core`'s, the very code the
//! engine simulator drives; the gateway turns HTTP and timer events into the core's inputs and
//! its decisions into actions. Its parts:
//!
//! - **HTTP**: [`server`] (binding, connections, the runtime), `routes` (a small handler per
//!   route), [`error`] (one error type, turned into a response in one place), [`config`]
//!   (checked whole before anything is bound), `body` (a body read within its bound),
//!   [`conns`] (client connections under a cap below the descriptor limit).
//! - **Requests**: [`request`] (what is checked of a body: a 400 names the field), [`classes`]
//!   (classes and tenants from headers, the body and a TOML file), [`forecast`] (what is
//!   predicted of a request's text), [`prefix`] (a prompt's block hashes for `prefix-affinity`).
//! - **Scheduling**: [`request_queue`] (the core under a lock, a waiter per queued request, the
//!   core's timers), [`life`] (one admitted request's life reported as it happens: its slot,
//!   times, tokens and what is learned from its answer).
//! - **Upstreams**: [`upstream`] (the engines, their clients, sending with one retry),
//!   [`relay`] (an answer's body on its way back, ended on silence or eviction), [`health`]
//!   (failing upstreams ejected for a backoff), [`engines`] (each engine's metrics and slots,
//!   scraped), [`tally`] (an answer's tokens counted as it passes).
//! - [`epp`]: the same decisions behind Envoy, as a Gateway API Inference Extension endpoint
//!   picker (`ext_proc` gRPC): the proxy carries the bytes, the picker names the endpoint.
//! - [`metrics`]: Prometheus histograms of queue wait, TTFT and TTLT at `GET /metrics`.
//!
//! # Errors
//!
//! One error, [`GatewayError`]: why the gateway or the endpoint picker could not start or
//! serve (its configuration, the scheduling core's refusal of it, the classes file, a socket or
//! thread), from every public function but those below. Its payloads:
//! [`classes::InvalidClasses`] (a classes file's field and what is wrong) and the core's
//! [`SchedulerError`](xsched_llm_core::SchedulerError). Two error types stay apart, being no
//! failure of the gateway's: [`error::ApiError`], the answer to one request, turned into its HTTP
//! status, OpenAI error body, `Retry-After` and `Connection: close` in one place (it carries the
//! core's per-request refusal, [`request_queue::RequestRefused`], which
//! [`RequestQueue::admit`](request_queue::RequestQueue::admit) returns for the routes and the
//! endpoint picker to answer by); and [`error::BodyError`], the boxed error hyper requires of an
//! answer's body. What is wrong with a request's body or headers is found by crate-private types
//! that become an `ApiError` by `?`.

mod body;
pub mod classes;
pub mod config;
pub mod conns;
pub mod engines;
pub mod epp;
pub mod error;
pub mod forecast;
pub mod health;
pub mod life;
pub mod metrics;
pub mod numbers;
pub mod prefix;
pub mod relay;
pub mod request;
pub mod request_queue;
mod routes;
pub mod server;
mod shared;
pub use xsched_openai::tally;
pub mod upstream;

pub use epp::{Epp, RunningEpp};
pub use server::{Gateway, GatewayConfig, GatewayError, RunningGateway};
pub use xsched_llm_core::{RequestPolicySpec, Router};
