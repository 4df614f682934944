//! The length model: an answer's length learned as a linear function of its prompt's words,
//! online, one answer at a time.
//!
//! The history predictor ([`crate::predictor`]) asks which past prompts are most like this one
//! and takes their answers' lengths. Its neighbours are alike in *what* they ask about, and a
//! topic says little of how long an answer runs; a few words say much more ("write a blog
//! post", "in one word", "list"), and cosine similarity over a whole prompt drowns them. A
//! linear model of the log length over the prompt's words and word pairs weighs each word by
//! what it has said about lengths so far. On the 2 000 recorded SmolLM2 answers of the vLLM
//! benchmark's warm set its predictions rank the true lengths better than the neighbours'
//! (docs/results/vllm.md).
//!
//! - **Features**: the hashes of the prompt's lowercased words and adjacent word pairs (the
//!   hashed embedding's, [`crate::embedding`]), folded into [`DIM`] weights with a sign bit,
//!   each counted `1 + ln n` for `n` occurrences, the vector scaled to unit length; plus a bias.
//! - **Learning**: one AdaGrad step on the squared error of the log length per answer
//!   ([`RATE`], [`L2`]); no passes over old answers, no history kept but the weights, so a
//!   learn and a prediction cost one pass over the prompt's words.
//! - **The distribution** SageSched ranks by: the point prediction times the spread of the
//!   model's own recent errors, each measured *before* it learned that answer ([`RESIDUALS`] of
//!   them, as [`ATOMS`] quantiles), so it is as wide as the model is wrong. A conversation's
//!   previous answer joins as the history predictor's does
//!   ([`PREVIOUS_ANSWER_WEIGHT`](crate::predictor::PREVIOUS_ANSWER_WEIGHT)).
//! - With nothing learned, the fixed prior; the bias starts at the prior's median.

use crate::embedding::gram_hashes;
use crate::predictor::PREVIOUS_ANSWER_WEIGHT;
use std::collections::{BTreeMap, VecDeque};
use xsched_llm_core::SizeDistribution;
use xsched_llm_core::predict::{Features, PRIOR, Predictor, prior};

/// Weights the features fold into (2^18: few collisions among a few thousand prompts' words).
pub const DIM: usize = 1 << 18;
/// AdaGrad's step (0.1 and 1.0 ranked the warm set's answers worse over one pass).
pub const RATE: f32 = 0.3;
/// Weight decay per step.
pub const L2: f32 = 1e-4;
/// The recent errors the distribution's spread is drawn from.
pub const RESIDUALS: usize = 256;
/// Atoms of a prediction (quantiles of the recent errors).
pub const ATOMS: usize = 10;

/// The online linear model of log answer length.
#[derive(Debug)]
pub struct LengthModel {
    /// [`DIM`] feature weights, then the bias.
    weights: Vec<f32>,
    /// AdaGrad's sum of squared gradients per weight.
    squares: Vec<f32>,
    /// Log-length errors (truth − prediction) of the latest answers, measured before learning
    /// each.
    residuals: VecDeque<f64>,
    learned: u64,
}

impl Default for LengthModel {
    fn default() -> LengthModel {
        LengthModel::new()
    }
}

impl LengthModel {
    /// Nothing learned.
    pub fn new() -> LengthModel {
        let mut weights = vec![0.0; DIM + 1];
        weights[DIM] = PRIOR[2].ln() as f32;
        LengthModel {
            weights,
            squares: vec![1e-6; DIM + 1],
            residuals: VecDeque::with_capacity(RESIDUALS),
            learned: 0,
        }
    }

    /// Answers learned.
    pub fn learned(&self) -> u64 {
        self.learned
    }

    /// The predicted log length of `x`.
    fn score(&self, x: &[(usize, f32)]) -> f64 {
        x.iter().map(|&(i, v)| f64::from(self.weights[i] * v)).sum()
    }

    /// The predicted output-length distribution for `prompt`.
    pub fn lookup(&self, prompt: &str, previous_answer: Option<u32>) -> SizeDistribution {
        if self.learned == 0 && previous_answer.is_none() {
            return prior();
        }
        let mut lengths: Vec<f64> = Vec::with_capacity(2 * ATOMS);
        if self.learned > 0 {
            let point = self.score(&features(prompt));
            let mut errors: Vec<f64> = self.residuals.iter().copied().collect();
            errors.sort_by(f64::total_cmp);
            lengths.extend((0..ATOMS).map(|k| {
                let e = errors
                    .get((k * 2 + 1) * errors.len() / (2 * ATOMS))
                    .copied()
                    .unwrap_or(0.0);
                (point + e).exp().max(1.0)
            }));
        }
        if let Some(p) = previous_answer {
            let w = (PREVIOUS_ANSWER_WEIGHT * lengths.len() as f64).round() as usize;
            lengths.extend(std::iter::repeat_n(f64::from(p.max(1)), w.max(1)));
        }
        SizeDistribution::from_valid_samples(&lengths, PRIOR[2])
    }

    /// `prompt`'s answer had `output_tokens`: one step towards it.
    pub fn remember(&mut self, prompt: &str, output_tokens: u32) {
        let x = features(prompt);
        let truth = f64::from(output_tokens.max(1)).ln();
        let error = self.score(&x) - truth;
        if self.residuals.len() == RESIDUALS {
            self.residuals.pop_front();
        }
        self.residuals.push_back(-error);
        let error = error as f32;
        for (i, v) in x {
            let g = error * v + L2 * self.weights[i];
            self.squares[i] += g * g;
            self.weights[i] -= RATE * g / self.squares[i].sqrt();
        }
        self.learned += 1;
    }
}

/// `prompt`'s features: (weight index, value), unit length over the words, then the bias.
fn features(prompt: &str) -> Vec<(usize, f32)> {
    // Ordered by hash, so a prompt's features come in one order every time (a hash map's order
    // changes from process to process, and with it how sums round).
    let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
    for h in gram_hashes(prompt) {
        *counts.entry(h).or_default() += 1;
    }
    let mut x: Vec<(usize, f32)> = counts
        .into_iter()
        .map(|(h, n)| {
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            ((h % DIM as u64) as usize, sign * (1.0 + (n as f32).ln()))
        })
        .collect();
    // By weight; words that share one keep their hashes' order (a stable sort).
    x.sort_by_key(|&(i, _)| i);
    let norm = x.iter().map(|(_, v)| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        x.iter_mut().for_each(|(_, v)| *v /= norm);
    }
    x.push((DIM, 1.0));
    x
}

impl Predictor for LengthModel {
    fn predict(&self, f: &Features) -> SizeDistribution {
        self.lookup(&f.prompt, f.previous_answer_tokens)
    }

    fn learn(&mut self, f: Features, output_tokens: u32) {
        self.remember(&f.prompt, output_tokens);
    }
}

#[cfg(test)]
mod tests;
