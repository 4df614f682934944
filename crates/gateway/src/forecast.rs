//! What the gateway predicts of a request before the scheduler (`xsched-llm-core`) queues it:
//! the prompt is embedded, the history predictor gives the distribution of its answer's length
//! (similar past prompts' real lengths, and the conversation's previous answer), or the length
//! model where the policy says `:predict=model`, and its prompt tokens are estimated. The scheduler then orders, ages and admits by it; this module is only
//! the part that needs the request's text.
//!
//! The predictor learns online from every answer that ends whole: its output tokens as the
//! engine reported them (`usage`) or as counted from the stream (`tally.rs`). Input tokens are
//! the context's characters times a tokens-per-character ratio learned from the engine's
//! `usage.prompt_tokens` (0.25 until it reports one): the gateway does not run the engine's
//! tokenizer.

use crate::metrics::Metrics;
use crate::request::Checked;
use crate::tally::Counted;
use std::sync::{Arc, Mutex, MutexGuard};
use xsched_llm_core::SizeDistribution;
use xsched_llm_core::predict::{Embedding, Features, Predictor};
use xsched_llm_predict::embedding::Embedder;

/// Entries the predictor's history holds by default.
pub const HISTORY: usize = 10_000;
/// Tokens per character assumed until the engine reports a prompt's tokens.
pub const TOKENS_PER_CHAR: f64 = 0.25;
/// The weight of each new answer in the learned ratio's moving average.
const SMOOTHING: f64 = 0.1;

/// What was predicted for a request, kept until its answer ends.
#[derive(Clone, Debug)]
pub struct Forecast {
    embedding: Embedding,
    prompt: Arc<str>,
    previous_answer_tokens: Option<u32>,
    /// The predicted output lengths (capped at the request's bound).
    pub lengths: SizeDistribution,
    context_chars: usize,
    /// The estimated prompt tokens.
    pub input: u32,
}

/// A recorded prompt and its answer's length in tokens, for the history before the first
/// request (`GatewayConfig::history_seed`).
#[derive(Clone, Debug)]
pub struct SeedAnswer {
    /// The prompt as a request would carry it (its last user message).
    pub prompt: String,
    /// Its answer's length in the engine's tokens.
    pub output_tokens: u32,
}

struct Learned {
    predictor: Box<dyn Predictor>,
    tokens_per_char: f64,
}

/// The embedder and the predictor that learns from answers.
pub struct Forecaster {
    embedder: Arc<dyn Embedder>,
    learned: Mutex<Learned>,
    metrics: Arc<Metrics>,
}

impl Forecaster {
    /// Predicting with `embedder` and `predictor` (`xsched_llm_predict::learner` makes the one
    /// a policy asks for).
    pub fn new(
        embedder: Arc<dyn Embedder>,
        predictor: Box<dyn Predictor>,
        metrics: Arc<Metrics>,
    ) -> Forecaster {
        Forecaster {
            embedder,
            learned: Mutex::new(Learned {
                predictor,
                tokens_per_char: TOKENS_PER_CHAR,
            }),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Learned> {
        // Updates are single assignments and a history insert that cannot leave it torn.
        self.learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Predict `req` (CPU work: embedding and a history scan; for a blocking thread).
    pub fn forecast(&self, req: &Checked) -> Forecast {
        let embedding = self.embedder.embed(&req.prompt);
        let learned = self.lock();
        let tokens = |chars: usize| (chars as f64 * learned.tokens_per_char).round() as u32;
        let features = Features {
            embedding,
            prompt: req.prompt.as_str().into(),
            previous_answer_tokens: req.previous_answer_chars.map(tokens),
        };
        let lengths = learned.predictor.predict(&features);
        Forecast {
            input: tokens(req.context_chars).max(1),
            embedding: features.embedding,
            prompt: features.prompt,
            previous_answer_tokens: features.previous_answer_tokens,
            lengths: xsched_llm_core::predict::capped(lengths, req.output_bound()),
            context_chars: req.context_chars,
        }
    }

    /// Learn the recorded answers of `seed`, in order, as if each had just ended (its
    /// conversation's previous answer unknown).
    pub fn seed(&self, seed: &[SeedAnswer]) {
        for answer in seed {
            let embedding = self.embedder.embed(&answer.prompt);
            let features = Features {
                embedding,
                prompt: answer.prompt.as_str().into(),
                previous_answer_tokens: None,
            };
            self.lock().predictor.learn(features, answer.output_tokens);
        }
    }

    /// An answer predicted as `forecast` ended whole, `counted` long: learn from it.
    pub fn learn(&self, forecast: Forecast, counted: Counted) {
        self.metrics
            .predicted(forecast.lengths.mean(), f64::from(counted.output_tokens));
        let mut learned = self.lock();
        let features = Features {
            embedding: forecast.embedding,
            prompt: forecast.prompt,
            previous_answer_tokens: forecast.previous_answer_tokens,
        };
        learned.predictor.learn(features, counted.output_tokens);
        if let Some(p) = counted.prompt_tokens
            && forecast.context_chars > 0
        {
            let ratio = f64::from(p) / forecast.context_chars as f64;
            learned.tokens_per_char += SMOOTHING * (ratio - learned.tokens_per_char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Endpoint, check};
    use xsched_llm_predict::embedding::Hashed;

    fn forecaster() -> Forecaster {
        let history = Box::new(xsched_llm_predict::predictor::History::new(100));
        Forecaster::new(Arc::new(Hashed), history, Arc::default())
    }

    fn chat(text: &str, max_tokens: u32) -> Checked {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
        });
        check(Endpoint::Chat, body.to_string().as_bytes()).expect("valid")
    }

    fn teach(f: &Forecaster, text: &str, tokens: u32, prompt: Option<u32>, times: usize) {
        for _ in 0..times {
            let forecast = f.forecast(&chat(text, 4096));
            let counted = Counted {
                output_tokens: tokens,
                prompt_tokens: prompt,
            };
            f.learn(forecast, counted);
        }
    }

    #[test]
    fn the_history_learns_online_which_prompts_have_short_answers() {
        let f = forecaster();
        let (short, long) = (
            "say yes or no",
            "write a long essay about the history of rome",
        );
        let [a, b] = [short, long].map(|t| f.forecast(&chat(t, 4096)).lengths.mean());
        assert_eq!(a, b, "nothing learned: one prior for both");
        for _ in 0..20 {
            teach(&f, short, 2, None, 1);
            teach(&f, long, 800, None, 1);
        }
        let [a, b] = [short, long].map(|t| f.forecast(&chat(t, 4096)).lengths.mean());
        assert!(a < b, "{a} vs {b}");
    }

    #[test]
    fn a_seeded_history_predicts_as_one_that_learned_online() {
        let (short, long) = ("say yes or no", "write a long essay about rome");
        let seed: Vec<SeedAnswer> = (0..20)
            .flat_map(|_| [(short, 2), (long, 800)])
            .map(|(prompt, output_tokens)| SeedAnswer {
                prompt: prompt.to_owned(),
                output_tokens,
            })
            .collect();
        let (seeded, online) = (forecaster(), forecaster());
        seeded.seed(&seed);
        for _ in 0..20 {
            teach(&online, short, 2, None, 1);
            teach(&online, long, 800, None, 1);
        }
        for text in [short, long] {
            let [a, b] = [&seeded, &online].map(|f| f.forecast(&chat(text, 4096)).lengths);
            assert_eq!(a.atoms(), b.atoms(), "{text}");
        }
    }

    #[test]
    fn predictions_are_capped_at_the_requests_bound() {
        let f = forecaster();
        teach(&f, "long", 1000, None, 40);
        assert!(f.forecast(&chat("long", 16)).lengths.max() <= 16.0);
    }

    #[test]
    fn input_tokens_follow_the_engines_reported_prompt_lengths() {
        let f = forecaster();
        let text = "x".repeat(400);
        assert_eq!(f.forecast(&chat(&text, 8)).input, 100, "0.25 a character");
        teach(&f, &text, 8, Some(400), 60);
        let learned = f.lock().tokens_per_char;
        assert!((learned - 1.0).abs() < 0.01, "{learned}");
        assert!(f.forecast(&chat(&text, 8)).input > 390);
    }

    #[test]
    fn answers_of_no_tokens_are_learned_without_panicking() {
        let f = forecaster();
        teach(&f, "empty", 0, Some(1), 100);
        let d = f.forecast(&chat("empty", 0)).lengths;
        assert!(d.mean().is_finite() && d.max() >= 1.0);
    }
}
