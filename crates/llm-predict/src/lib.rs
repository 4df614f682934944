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

#[cfg(test)]
mod tests {
    use super::*;
    use embedding::{Embedder, Hashed};
    use xsched_llm_core::predict::Features;

    fn features(text: &str) -> Features {
        Features {
            embedding: Hashed.embed(text),
            prompt: text.into(),
            previous_answer_tokens: None,
        }
    }

    /// Teach `p` that essays run long and sums short; the mean it predicts for an unseen
    /// essay and an unseen sum.
    fn taught(mut p: Box<dyn Predictor>) -> (f64, f64) {
        for i in 0..100 {
            p.learn(features(&format!("write an essay on theme {i}")), 800);
            p.learn(features(&format!("add {i} and {}", i + 2)), 8);
        }
        let essay = p.predict(&features("write an essay on rome")).mean();
        let sum = p.predict(&features("add 3 and 4")).mean();
        (essay, sum)
    }

    #[test]
    fn each_learned_source_gets_its_own_learner_and_both_learn() {
        let history = learner(PredictionSource::History, 1_000);
        let model = learner(PredictionSource::Model, 1_000);
        // Only the history predictor holds answers; a one-entry history shows it.
        let mut tiny = learner(PredictionSource::History, 1);
        tiny.learn(features("first"), 10);
        tiny.learn(features("second"), 1_000);
        assert_eq!(tiny.predict(&features("first")).mean(), 1_000.0);
        let mut tiny_model = learner(PredictionSource::Model, 1);
        tiny_model.learn(features("first"), 10);
        tiny_model.learn(features("second"), 1_000);
        assert_ne!(tiny_model.predict(&features("first")).mean(), 1_000.0);
        for (name, (essay, sum)) in [("history", taught(history)), ("model", taught(model))] {
            assert!(essay > 10.0 * sum, "{name}: essay {essay}, sum {sum}");
        }
    }
}
