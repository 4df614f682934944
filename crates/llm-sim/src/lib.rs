//! # xsched-llm-sim
//!
//! The LLM engine simulator: a deterministic vLLM-like engine driven by the scheduler of
//! `xsched-llm-core`, in virtual time, so a simulated result is evidence about the code the
//! gateway runs. Datasets and studies (`xsched-llm`) feed it and read it; this crate knows no
//! dataset.
//!
//! - [`engine`]: continuous batching with a token budget per step, `max_num_seqs`, chunked
//!   prefill, a KV-cache block pool, preemption by recompute and pauses (swap or recompute);
//!   step time `β0 + β1·prefill + β2·decode + β3·attended` ([`presets`]: vLLM's defaults on
//!   real GPUs; [`measured`]: fitted on engines run here; [`provenance`]: where each number
//!   comes from).
//! - [`sim`]: the scheduler driven in front of one or more simulated engines.
//! - [`calibrate`]: the step time's attention term fitted to a real engine's measured replay.

pub mod calibrate;
pub mod engine;
pub mod measured;
pub mod presets;
pub mod provenance;
pub mod sim;
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
