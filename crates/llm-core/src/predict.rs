//! The predictor interface: what a request's features are and what is predicted of it, an
//! output-length *distribution*. The history predictor and the embedders that make features
//! live elsewhere (`xsched-llm-predict`); drivers ask them before they hand an arrival to the
//! [`crate::RequestScheduler`], outside its state, since a lookup is the expensive part (a history
//! scan) and the scheduler must stay cheap to call.

use crate::gittins::SizeDistribution;
use std::sync::Arc;

/// A prompt's embedding (unit length).
pub type Embedding = Arc<[f32]>;

/// What a prediction is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Features {
    /// The prompt's embedding.
    pub embedding: Embedding,
    /// The prompt itself (the last user message, as embedded).
    pub prompt: Arc<str>,
    /// Tokens of the conversation's previous answer, if the prompt continues one (it is in the
    /// context any server receives).
    pub previous_answer_tokens: Option<u32>,
}

/// Predicts output lengths and learns from completed requests.
pub trait Predictor: Send {
    /// The predicted output-length distribution (tokens) of a request with `features`.
    fn predict(&self, features: &Features) -> SizeDistribution;
    /// A request with `features` completed with `output_tokens`.
    fn learn(&mut self, features: Features, output_tokens: u32);
}

/// Output lengths assumed when nothing was learned yet (tokens): a wide, even prior.
pub const PRIOR: [f64; 5] = [32.0, 128.0, 256.0, 512.0, 1024.0];

/// The prior as a distribution.
pub fn prior() -> SizeDistribution {
    SizeDistribution::from_valid_samples(&PRIOR, PRIOR[2])
}

/// `lengths` with every length above `max_tokens` cut to it (a request cannot answer longer
/// than it asked); unchanged without a bound. A bound of 0 counts as 1 token.
pub fn capped(lengths: SizeDistribution, max_tokens: Option<u32>) -> SizeDistribution {
    match max_tokens {
        Some(cap) => {
            let cap = f64::from(cap.max(1));
            lengths.map(|o| o.min(cap)).unwrap_or(lengths)
        }
        None => lengths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_caps_every_length_and_zero_counts_as_one() {
        let d = capped(prior(), Some(100));
        assert_eq!(d.max(), 100.0);
        assert_eq!(capped(prior(), Some(0)).max(), 1.0);
        assert_eq!(capped(prior(), None), prior());
    }
}
