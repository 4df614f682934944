//! The semantic history predictor: similar past prompts' real output lengths, as a distribution.
//!
//! Prompts are embedded with a built-in hashed n-gram embedding (word unigrams and bigrams,
//! signed feature hashing into [`DIM`] dimensions, L2-normalized): no model files needed. The
//! history holds (embedding, true output tokens) of *completed* requests only, up to a
//! capacity, oldest evicted first, so a prediction never sees the request it predicts. A
//! prediction is the output lengths of the [`NEIGHBOURS`] most cosine-similar past prompts.
//! Cold start (fewer than [`MIN_HISTORY`] entries): every length seen so far, or a fixed prior
//! when nothing was seen.

use std::collections::VecDeque;
use xsched_core::gittins::SizeDistribution;

/// Embedding dimensions.
pub const DIM: usize = 128;
/// Neighbours per prediction.
pub const NEIGHBOURS: usize = 10;
/// Entries needed before neighbours are used.
pub const MIN_HISTORY: usize = NEIGHBOURS;
/// Output lengths assumed when nothing was seen yet (tokens): a wide, even prior.
const PRIOR: [f64; 5] = [32.0, 128.0, 256.0, 512.0, 1024.0];

/// A prompt's embedding.
pub type Embedding = [f32; DIM];

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The built-in hashed n-gram embedding of `text`.
pub fn embed(text: &str) -> Embedding {
    let mut v = [0f32; DIM];
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut add = |h: u64| {
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[(h % DIM as u64) as usize] += sign;
    };
    let hashes: Vec<u64> = words.iter().map(|w| fnv1a(w.as_bytes(), 0)).collect();
    for &h in &hashes {
        add(h);
    }
    for pair in hashes.windows(2) {
        // A bigram's feature: its words' hashes combined (no string building).
        add(pair[0].rotate_left(17) ^ pair[1].wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Dot product with eight independent accumulators, so the compiler can use SIMD lanes (a
/// single running sum fixes the order of additions and forbids it).
fn dot(a: &Embedding, b: &Embedding) -> f32 {
    let mut acc = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum()
}

/// The history and the predictions drawn from it.
#[derive(Debug)]
pub struct Predictor {
    history: VecDeque<(Embedding, u32)>,
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
        self.history.push_back((embedding, output_tokens));
    }

    /// The predicted output-length distribution for a prompt with `embedding`.
    pub fn predict(&self, embedding: &Embedding) -> SizeDistribution {
        let lengths: Vec<f64> = if self.history.len() < MIN_HISTORY {
            self.history.iter().map(|(_, o)| f64::from(*o)).collect()
        } else {
            // Top-k by similarity with a small sorted buffer: O(n·k), no allocation per entry.
            let mut top: Vec<(f32, u32)> = Vec::with_capacity(NEIGHBOURS + 1);
            for (e, o) in &self.history {
                let s = dot(embedding, e);
                if top.len() < NEIGHBOURS || s > top[top.len() - 1].0 {
                    let at = top.partition_point(|(t, _)| *t >= s);
                    top.insert(at, (s, *o));
                    top.truncate(NEIGHBOURS);
                }
            }
            top.iter().map(|(_, o)| f64::from(*o)).collect()
        };
        if lengths.is_empty() {
            return SizeDistribution::from_valid_samples(&PRIOR, PRIOR[2]);
        }
        SizeDistribution::from_valid_samples(&lengths, PRIOR[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
