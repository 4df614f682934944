//! # xsched-llm-predict
//!
//! What LLM request schedulers predict from, apart from the scheduler itself
//! (`xsched-llm-core`) and from any dataset, so the gateway links it without the simulator's
//! data loaders:
//!
//! - [`embedding`]: prompt embeddings: built-in hashed n-grams, or all-MiniLM-L6-v2 via candle
//!   (the `minilm` feature).
//! - [`predictor`]: the semantic history predictor (cosine nearest neighbours over a bounded
//!   history of completed requests), returning an output-length *distribution*; it implements
//!   the core's `Predictor`.
//! - [`regression`]: the length model (an online linear model of the log length over the
//!   prompt's words), the other implementation of the core's `Predictor`, chosen by a policy's
//!   `:predict=model`; [`learner`] makes the one a policy asks for.
//! - [`embed_cache`]: MiniLM's vectors kept between runs.
//! - [`tokenize`]: token counts with a real tokenizer (MiniLM's WordPiece).
//! - [`load`]: the MiniLM files loaded as an embedder or a token counter (with the `minilm`
//!   feature; without it, an error that says how to build it).
//!
//! # Errors
//!
//! Every fallible function, and [`TokenCounter::count_all`](tokenize::TokenCounter::count_all),
//! returns [`PredictError`]: a model or tokenizer file that cannot be loaded, a tokenizer that
//! fails, a build without MiniLM, or an embedding cache that cannot be opened.

pub mod embed_cache;
pub mod embedding;
mod error;
pub mod load;
#[cfg(feature = "minilm")]
pub mod minilm;
pub mod predictor;
pub mod regression;
pub mod tokenize;

pub use error::PredictError;
use xsched_llm_core::PredictionSource;
use xsched_llm_core::predict::Predictor;

/// The predictor that learns from answers for a policy predicting from `source`: the length
/// model for [`PredictionSource::Model`], else the history predictor of `history` entries.
pub fn learner(source: PredictionSource, history: usize) -> Box<dyn Predictor> {
    match source {
        PredictionSource::Model => Box::new(regression::LengthModel::new()),
        _ => Box::new(predictor::History::new(history)),
    }
}
