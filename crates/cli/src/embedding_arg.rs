//! The predictor's prompt embedding as the gateway and the replay take it (`--embedding`,
//! `--minilm-dir`), so that a replay predicts from the very vectors the gateway would.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::sync::Arc;
use xsched_llm_predict::embedding::{Embedder, Hashed};

/// Which embedding the history predictor compares prompts by.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum EmbeddingChoice {
    /// The built-in hashed n-grams (microseconds a prompt).
    Hashed,
    /// all-MiniLM-L6-v2 (the `minilm` feature and a model directory; milliseconds a prompt).
    Minilm,
}

/// `--embedding` and `--minilm-dir`.
#[derive(Args)]
pub struct EmbeddingArgs {
    /// The predictor's prompt embedding (the SageSched policies, SSJF, TRAIL and the cost-aware
    /// router predict from it).
    #[arg(long, value_enum, default_value = "hashed")]
    embedding: EmbeddingChoice,
    /// MiniLM model directory (default: $XSCHED_MINILM_DIR), for --embedding minilm.
    #[arg(long)]
    minilm_dir: Option<PathBuf>,
}

impl EmbeddingArgs {
    /// The chosen embedder, loaded.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        match self.embedding {
            EmbeddingChoice::Hashed => Ok(Arc::new(Hashed)),
            EmbeddingChoice::Minilm => {
                let dir = xsched_llm_predict::load::minilm_dir(self.minilm_dir.clone())
                    .context("--embedding minilm needs --minilm-dir or XSCHED_MINILM_DIR")?;
                let m = xsched_llm_predict::load::load_minilm(&dir)
                    .with_context(|| format!("loading MiniLM from {}", dir.display()))?;
                Ok(Arc::from(m))
            }
        }
    }
}
