//! The semantic history predictor: similar past prompts' real output lengths, as a distribution.
//!
//! Prompts arrive embedded (by [`crate::embedding`]: hashed n-grams or MiniLM). The history
//! holds (embedding, true output tokens) of *completed* requests only, up to a
//! capacity, oldest evicted first, so a prediction never sees the request it predicts. A
//! prediction is the output lengths of the [`NEIGHBOURS`] most cosine-similar past prompts,
//! less those far less similar than the most similar one (below [`SIMILARITY_CUT`] of its
//! similarity; the first [`MIN_NEIGHBOURS`] are always kept), and, when the prompt continues a
//! conversation, the length of that conversation's previous answer, weighted
//! [`PREVIOUS_ANSWER_WEIGHT`] against them: answers within one conversation have similar
//! lengths, and the previous answer is in the context any server receives, so nothing is looked
//! ahead.
//! The cut is for a young history: with 40 answers learned, 30 neighbours are three quarters of
//! it, so every prediction was about the same; leaving out the dissimilar ones lets a gateway
//! with tens of answers separate short from long (the test in `xsched-llm`'s `evaluate.rs`),
//! and changes little once the history is large. With nothing learned, a fixed prior.
//!
//! Up to [`EXACT_LIMIT`] entries a lookup scans every entry's 8-bit vector. Beyond, it first
//! ranks every entry by its vector's signs, then rescans the [`CANDIDATES`] best exactly
//! (binary quantization with rescoring): for dense vectors (MiniLM) one bit per dimension
//! compared by Hamming distance, 48 bytes per entry instead of 384; for sparse ones (the hashed
//! embedding, where most components are 0 and a sign bit would call them all positive) two
//! bit planes, −1 / 0 / +1, compared by their dot product. Which one is decided when the history
//! first outgrows [`EXACT_LIMIT`], by most of the vectors it holds then ([`SPARSE`]); the signs
//! are kept from then on, never before (a history that stays small never pays for them). An
//! HNSW index from
//! `instant-distance` was tried first: it can neither insert nor delete, so a bounded history
//! must rebuild it, and a single-threaded build of a large history takes tens of seconds.

mod vectors;

use std::cmp::Reverse;
pub use vectors::SPARSE;
use vectors::{Signs, dot, quantize};
use xsched_llm_core::SizeDistribution;
pub use xsched_llm_core::predict::Embedding;
use xsched_llm_core::predict::{Features, PRIOR, Predictor, prior};

/// Neighbours per prediction (more than 10 ranked ShareGPT's answers better, with the previous
/// answer and without).
pub const NEIGHBOURS: usize = 30;
/// How much a conversation's previous answer weighs against the neighbours: it joins their
/// lengths this many times their number (0.5: 15 samples beside 30; lighter and heavier
/// weights ranked worse).
pub const PREVIOUS_ANSWER_WEIGHT: f64 = 0.5;
/// Neighbours less similar than this fraction of the most similar one's similarity are left
/// out (a stricter cut, and neighbours weighted by similarity, ranked ShareGPT's answers worse).
pub const SIMILARITY_CUT: f64 = 0.5;
/// The most similar neighbours always kept.
pub const MIN_NEIGHBOURS: usize = 3;

/// History sizes up to which a lookup scans every entry exactly.
pub const EXACT_LIMIT: usize = 20_000;
/// Entries rescanned exactly after the sign-bit pass (above [`EXACT_LIMIT`]).
pub const CANDIDATES: usize = 400;

/// The history and the predictions drawn from it. Entries live in flat ring buffers (one
/// allocation each for vectors, signs and lengths), so a lookup streams memory in order.
#[derive(Debug)]
pub struct History {
    capacity: usize,
    /// Dimensions (set by the first entry; entries of other sizes are not learned).
    dim: usize,
    /// `dim` 8-bit components per entry, slot after slot.
    vectors: Vec<i8>,
    /// How signs are kept (decided when the history first outgrows [`EXACT_LIMIT`]).
    mode: Signs,
    /// The signs' words per entry, slot after slot (empty up to [`EXACT_LIMIT`] entries).
    signs: Vec<u64>,
    lengths: Vec<u32>,
    /// The slot of the oldest entry (once the ring is full; 0 before).
    head: usize,
}

impl History {
    /// An empty history holding at most `capacity` entries.
    pub fn new(capacity: usize) -> History {
        History {
            capacity: capacity.max(1),
            dim: 0,
            vectors: Vec::new(),
            mode: Signs::Binary,
            signs: Vec::new(),
            lengths: Vec::new(),
            head: 0,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether nothing was learned yet.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    fn words(&self) -> usize {
        self.mode.words(self.dim)
    }

    /// A request completed with `output_tokens`: remember it.
    pub fn remember(&mut self, embedding: Embedding, output_tokens: u32) {
        if self.dim == 0 {
            self.dim = embedding.len();
        }
        if embedding.len() != self.dim || self.dim == 0 {
            tracing::warn!(
                "an embedding of {} dimensions in a history of {}: not learned",
                embedding.len(),
                self.dim
            );
            return;
        }
        let vector = quantize(&embedding);
        let signed = !self.signs.is_empty();
        let signs = if signed {
            self.mode.bits(&vector)
        } else {
            Vec::new()
        };
        if self.len() < self.capacity {
            self.vectors.extend_from_slice(&vector);
            self.signs.extend_from_slice(&signs);
            self.lengths.push(output_tokens);
            if !signed && self.len() > EXACT_LIMIT {
                self.sign_everything();
            }
            return;
        }
        let (slot, dim, words) = (self.head, self.dim, self.words());
        self.vectors[slot * dim..(slot + 1) * dim].copy_from_slice(&vector);
        if signed {
            self.signs[slot * words..(slot + 1) * words].copy_from_slice(&signs);
        }
        self.lengths[slot] = output_tokens;
        self.head = (slot + 1) % self.capacity;
    }

    /// The history just outgrew [`EXACT_LIMIT`]: choose how signs are kept by what most of
    /// its vectors are, and sign every entry.
    fn sign_everything(&mut self) {
        let sparse = self
            .vectors
            .chunks_exact(self.dim)
            .filter(|v| Signs::of(v) == Signs::Ternary)
            .count();
        self.mode = if 2 * sparse > self.len() {
            Signs::Ternary
        } else {
            Signs::Binary
        };
        let mode = self.mode;
        self.signs = self
            .vectors
            .chunks_exact(self.dim)
            .flat_map(|v| mode.bits(v))
            .collect();
    }

    /// The slots from the oldest entry to the newest.
    fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        (self.head..self.len()).chain(0..self.head)
    }

    fn vector(&self, slot: usize) -> &[i8] {
        &self.vectors[slot * self.dim..(slot + 1) * self.dim]
    }

    /// The [`NEIGHBOURS`] most similar entries as (similarity, slot), best first, ties to the
    /// older (all of a smaller history): every entry up to [`EXACT_LIMIT`], else the
    /// [`CANDIDATES`] best by signs.
    fn nearest(&self, query: &[i8]) -> Vec<(i32, usize)> {
        let mut top: Vec<(i32, usize)> = Vec::with_capacity(NEIGHBOURS + 1);
        let mut offer = |s: i32, slot: usize| {
            if top.len() < NEIGHBOURS || s > top[top.len() - 1].0 {
                let pos = top.partition_point(|(t, _)| *t >= s);
                top.insert(pos, (s, slot));
                top.truncate(NEIGHBOURS);
            }
        };
        if self.len() <= EXACT_LIMIT {
            for slot in self.slots() {
                offer(dot(query, self.vector(slot)), slot);
            }
            return top;
        }
        let (signs, words) = (self.mode.bits(query), self.words());
        // The CANDIDATES best sign dot products (a min-heap of them, keyed by age so that
        // ties go to the older).
        let mut near: std::collections::BinaryHeap<Reverse<(i32, Reverse<usize>)>> =
            std::collections::BinaryHeap::with_capacity(CANDIDATES + 1);
        for (age, slot) in self.slots().enumerate() {
            let s = self
                .mode
                .similarity(&signs, &self.signs[slot * words..(slot + 1) * words]);
            if near.len() < CANDIDATES {
                near.push(Reverse((s, Reverse(age))));
            } else if near.peek().is_some_and(|w| s > w.0.0) {
                near.pop();
                near.push(Reverse((s, Reverse(age))));
            }
        }
        let mut ages: Vec<usize> = near.into_iter().map(|c| c.0.1.0).collect();
        ages.sort_unstable();
        for age in ages {
            let slot = (self.head + age) % self.len();
            offer(dot(query, self.vector(slot)), slot);
        }
        top
    }

    /// The predicted output-length distribution for a prompt with `embedding`.
    pub fn lookup(&self, embedding: &[f32], previous_answer: Option<u32>) -> SizeDistribution {
        let near = self.nearest(&quantize(embedding));
        // Without any similar entry (the best at or below 0) all are kept: none says more.
        let bar = near
            .first()
            .map_or(0.0, |n| SIMILARITY_CUT * f64::from(n.0.max(0)));
        let mut lengths: Vec<f64> = near
            .iter()
            .enumerate()
            .filter(|(i, n)| *i < MIN_NEIGHBOURS || f64::from(n.0) >= bar)
            .map(|(_, &(_, slot))| f64::from(self.lengths[slot]))
            .collect();
        if let Some(p) = previous_answer {
            // At least once: with no history yet, the previous answer is all there is.
            let w = (PREVIOUS_ANSWER_WEIGHT * lengths.len() as f64).round() as usize;
            lengths.extend(std::iter::repeat_n(f64::from(p), w.max(1)));
        }
        if lengths.is_empty() {
            return prior();
        }
        SizeDistribution::from_valid_samples(&lengths, PRIOR[2])
    }

    /// How many of the sign-bit pass's [`NEIGHBOURS`] are as similar as an exact scan's
    /// (at least its `NEIGHBOURS`-th similarity), over `queries`: 1.0 when the history is within
    /// [`EXACT_LIMIT`] (no sign-bit pass).
    pub fn recall(&self, queries: &[Embedding]) -> f64 {
        if self.len() <= EXACT_LIMIT || queries.is_empty() {
            return 1.0;
        }
        let mut hits = 0usize;
        let mut asked = 0usize;
        for q in queries {
            let q = quantize(q);
            let mut exact: Vec<i32> = self.slots().map(|s| dot(&q, self.vector(s))).collect();
            exact.sort_unstable_by(|a, b| b.cmp(a));
            let bar = exact[NEIGHBOURS.min(exact.len()) - 1];
            let found = self.nearest(&q);
            hits += found.iter().filter(|(s, _)| *s >= bar).count();
            asked += NEIGHBOURS;
        }
        hits as f64 / asked as f64
    }
}

impl Predictor for History {
    fn predict(&self, f: &Features) -> SizeDistribution {
        self.lookup(&f.embedding, f.previous_answer_tokens)
    }

    fn learn(&mut self, f: Features, output_tokens: u32) {
        self.remember(f.embedding, output_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedding::{Embedder, HASHED_DIM, Hashed};

    fn embed(text: &str) -> Embedding {
        Hashed.embed(text)
    }

    #[test]
    fn similar_prompts_predict_similar_lengths() {
        let mut p = History::new(100);
        for i in 0..2 * NEIGHBOURS {
            p.remember(
                embed(&format!("write a long essay about history topic {i}")),
                900,
            );
            p.remember(embed(&format!("what is {i} plus {i}")), 10);
        }
        let long = p.lookup(&embed("write a long essay about the history of rome"), None);
        let short = p.lookup(&embed("what is 7 plus 9"), None);
        assert!(long.mean() > 500.0, "{:?}", long.atoms());
        assert!(short.mean() < 100.0, "{:?}", short.atoms());
    }

    #[test]
    fn a_conversations_previous_answer_joins_the_neighbours_at_its_weight() {
        let mut p = History::new(100);
        for i in 0..NEIGHBOURS {
            p.remember(embed(&format!("tell me more {i}")), 100);
        }
        let alone = p.lookup(&embed("tell me more"), None);
        assert!((alone.mean() - 100.0).abs() < 1e-9, "{}", alone.mean());
        let continued = p.lookup(&embed("tell me more"), Some(400));
        let w = PREVIOUS_ANSWER_WEIGHT * NEIGHBOURS as f64;
        let want =
            (100.0 * NEIGHBOURS as f64 + 400.0 * w.round()) / (NEIGHBOURS as f64 + w.round());
        assert!(
            (continued.mean() - want).abs() < 1e-9,
            "{} vs {want}",
            continued.mean()
        );
        let empty = History::new(10);
        let alone = empty.lookup(&embed("x"), Some(77)).mean();
        assert!((alone - 77.0).abs() < 1e-9, "nothing else known: {alone}");
    }

    #[test]
    fn beyond_the_exact_limit_sign_bits_find_what_a_scan_finds() {
        let mut p = History::new(EXACT_LIMIT + 5_000);
        for i in 0..EXACT_LIMIT + 4_000 {
            let topic = i % 500;
            p.remember(
                embed(&format!("question about topic {topic} number {i}")),
                (topic as u32 + 1) * 3,
            );
        }
        let queries: Vec<Embedding> = (0..500)
            .step_by(25)
            .map(|t| embed(&format!("question about topic {t}")))
            .collect();
        let recall = p.recall(&queries);
        assert!(recall >= 0.9, "recall {recall}");
        assert_eq!(p.mode, Signs::Ternary, "hashed embeddings are sparse");
    }

    #[test]
    fn dense_vectors_take_one_sign_bit_and_keep_their_neighbours() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut gauss = |scale: f32| -> Vec<f32> {
            (0..384)
                .map(|_| (rng.random::<f32>() - 0.5) * scale)
                .collect()
        };
        let unit = |mut v: Vec<f32>| -> Embedding {
            crate::embedding::normalize(&mut v);
            v.into()
        };
        let centers: Vec<Vec<f32>> = (0..300).map(|_| gauss(1.0)).collect();
        let mut p = History::new(EXACT_LIMIT + 5_000);
        for i in 0..EXACT_LIMIT + 4_000 {
            let noise = gauss(0.6);
            let c = &centers[i % centers.len()];
            p.remember(
                unit(c.iter().zip(&noise).map(|(a, b)| a + b).collect()),
                i as u32,
            );
        }
        assert_eq!(p.mode, Signs::Binary);
        let queries: Vec<Embedding> = centers.iter().take(20).map(|c| unit(c.clone())).collect();
        let recall = p.recall(&queries);
        assert!(recall >= 0.9, "recall {recall}");
    }

    #[test]
    fn the_sign_mode_follows_most_vectors_not_the_first() {
        let mut p = History::new(EXACT_LIMIT + 10);
        let mut dense = vec![1.0f32; HASHED_DIM];
        crate::embedding::normalize(&mut dense);
        p.remember(dense.into(), 1);
        for i in 1..EXACT_LIMIT {
            p.remember(embed(&format!("sparse prompt {i}")), 2);
        }
        assert!(p.signs.is_empty(), "no signs up to the exact limit");
        p.remember(embed("one more"), 3);
        assert_eq!(p.mode, Signs::Ternary, "most vectors are sparse");
        assert_eq!(p.signs.len(), p.len() * p.words());
        p.remember(embed("and another"), 4);
        assert_eq!(p.signs.len(), p.len() * p.words());
    }

    #[test]
    fn neighbours_far_less_similar_than_the_best_are_left_out() {
        // Forty answers, half short and half long: a short prompt's prediction is the short
        // answers', not an average of three quarters of everything.
        let mut p = History::new(100);
        for i in 0..20 {
            p.remember(embed(&format!("what is {i} plus {i}")), 5);
            p.remember(embed(&format!("write a long essay about topic {i}")), 500);
        }
        let short = p.lookup(&embed("what is 3 plus 4"), None);
        assert!((short.mean() - 5.0).abs() < 1e-9, "{:?}", short.atoms());
        let long = p.lookup(&embed("write a long essay about topic 7"), None);
        assert!((long.mean() - 500.0).abs() < 1e-9, "{:?}", long.atoms());
        // Nothing similar at all (orthogonal vectors): every neighbour is kept.
        let axis =
            |k: usize| -> Embedding { (0..5).map(|i| if i == k { 1.0 } else { 0.0 }).collect() };
        let mut p = History::new(10);
        for k in 0..4 {
            p.remember(axis(k), 10 * (k as u32 + 1));
        }
        assert_eq!(p.lookup(&axis(4), None).atoms().len(), 4);
    }

    #[test]
    fn cold_start_and_bounded_history() {
        let p = History::new(3);
        assert_eq!(p.lookup(&embed("x"), None).atoms().len(), PRIOR.len());
        let mut p = History::new(3);
        for o in [1, 2, 3, 4] {
            p.remember(embed("x"), o);
        }
        assert_eq!(p.len(), 3, "oldest evicted");
        let d = p.lookup(&embed("x"), None);
        assert_eq!(
            d.atoms().iter().map(|a| a.0).collect::<Vec<_>>(),
            vec![2.0, 3.0, 4.0]
        );
    }
}
