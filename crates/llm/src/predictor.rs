//! The semantic history predictor: similar past prompts' real output lengths, as a distribution.
//!
//! Prompts arrive embedded (by [`crate::embedding`]: hashed n-grams or MiniLM). The history
//! holds (embedding, true output tokens) of *completed* requests only, up to a
//! capacity, oldest evicted first, so a prediction never sees the request it predicts. A
//! prediction is the output lengths of the [`NEIGHBOURS`] most cosine-similar past prompts.
//! Cold start (fewer than [`MIN_HISTORY`] entries): every length seen so far, or a fixed prior
//! when nothing was seen.

use std::collections::VecDeque;
use std::sync::Arc;
use xsched_core::gittins::SizeDistribution;

/// Neighbours per prediction.
pub const NEIGHBOURS: usize = 10;
/// Entries needed before neighbours are used.
pub const MIN_HISTORY: usize = NEIGHBOURS;
/// Output lengths assumed when nothing was seen yet (tokens): a wide, even prior.
const PRIOR: [f64; 5] = [32.0, 128.0, 256.0, 512.0, 1024.0];

/// A prompt's embedding (unit length; see [`crate::embedding`]).
pub type Embedding = Arc<[f32]>;

/// An embedding stored in the history: 8-bit fixed point (×127), a quarter of the memory of
/// f32. A lookup streams every entry, so it is bound by memory bandwidth (384-dim f32 MiniLM
/// vectors: 15 MB per prediction at 10 k entries); ranking by cosine barely changes.
fn quantize(v: &[f32]) -> Box<[i8]> {
    v.iter()
        .map(|x| (x * 127.0).round().clamp(-127.0, 127.0) as i8)
        .collect()
}

/// Integer dot product with sixteen independent lanes (vectorizable).
fn dot(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            acc[k] += i32::from(x[k]) * i32::from(y[k]);
        }
    }
    acc.iter().sum::<i32>() + tail
}

/// The history and the predictions drawn from it.
#[derive(Debug)]
pub struct Predictor {
    history: VecDeque<(Box<[i8]>, u32)>,
    capacity: usize,
}

impl Predictor {
    /// An empty history holding at most `capacity` entries.
    pub fn new(capacity: usize) -> Predictor {
        Predictor {
            history: VecDeque::with_capacity(capacity.min(1 << 16)),
            capacity: capacity.max(1),
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.history.len()
    }

    /// Whether nothing was learned yet.
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    /// A request completed with `output_tokens`: remember it.
    pub fn learn(&mut self, embedding: Embedding, output_tokens: u32) {
        if self.history.len() == self.capacity {
            self.history.pop_front();
        }
        self.history
            .push_back((quantize(&embedding), output_tokens));
    }

    /// The predicted output-length distribution for a prompt with `embedding`.
    pub fn predict(&self, embedding: &[f32]) -> SizeDistribution {
        let lengths: Vec<f64> = if self.history.len() < MIN_HISTORY {
            self.history.iter().map(|(_, o)| f64::from(*o)).collect()
        } else {
            // Top-k by similarity with a small sorted buffer: O(n·k), no allocation per entry.
            let query = quantize(embedding);
            let mut top: Vec<(i32, u32)> = Vec::with_capacity(NEIGHBOURS + 1);
            for (e, o) in &self.history {
                let s = dot(&query, e);
                if top.len() < NEIGHBOURS || s > top[top.len() - 1].0 {
                    let at = top.partition_point(|(t, _)| *t >= s);
                    top.insert(at, (s, *o));
                    top.truncate(NEIGHBOURS);
                }
            }
            top.iter().map(|(_, o)| f64::from(*o)).collect()
        };
        if lengths.is_empty() {
            return Predictor::prior();
        }
        SizeDistribution::from_valid_samples(&lengths, PRIOR[2])
    }

    /// What is predicted before anything was learned: a wide, even prior.
    pub fn prior() -> SizeDistribution {
        SizeDistribution::from_valid_samples(&PRIOR, PRIOR[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedding::{Embedder, Hashed};

    fn embed(text: &str) -> Embedding {
        Hashed.embed(text)
    }

    #[test]
    fn similar_prompts_predict_similar_lengths() {
        let mut p = Predictor::new(100);
        for i in 0..20 {
            p.learn(
                embed(&format!("write a long essay about history topic {i}")),
                900,
            );
            p.learn(embed(&format!("what is {i} plus {i}")), 10);
        }
        let long = p.predict(&embed("write a long essay about the history of rome"));
        let short = p.predict(&embed("what is 7 plus 9"));
        assert!(long.mean() > 500.0, "{:?}", long.atoms());
        assert!(short.mean() < 100.0, "{:?}", short.atoms());
    }

    #[test]
    fn cold_start_and_bounded_history() {
        let p = Predictor::new(3);
        assert_eq!(p.predict(&embed("x")).atoms().len(), PRIOR.len());
        let mut p = Predictor::new(3);
        for o in [1, 2, 3, 4] {
            p.learn(embed("x"), o);
        }
        assert_eq!(p.len(), 3, "oldest evicted");
        let d = p.predict(&embed("x"));
        assert_eq!(
            d.atoms().iter().map(|a| a.0).collect::<Vec<_>>(),
            vec![2.0, 3.0, 4.0]
        );
    }
}
