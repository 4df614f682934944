//! What a study's inputs mean: the files a dataset or an arrival trace names, the requests
//! they make (one model's responses, or ShareGPT's turns counted by a real tokenizer), and the
//! embedder that serves the predictor.

use super::contract::{EmbeddingKind, Study};
use crate::LlmError;
use crate::data::{self, PromptRecord, TOKENS_PER_WORD};
use crate::experiment::ArrivalShape;
use crate::sharegpt;
use crate::trace;
use std::path::PathBuf;
use xsched_llm_core::chain_text;
use xsched_llm_predict::embed_cache;
use xsched_llm_predict::embedding::{Embedder, Hashed};
use xsched_llm_predict::load::{load_minilm, load_wordpiece, minilm_dir};
use xsched_llm_sim::engine::EngineConfig;

/// The requests a study runs, and how they were made (for the report's heading).
pub(super) struct Workload {
    pub(super) records: Vec<PromptRecord>,
    /// Dataset, model and counts.
    pub(super) what: String,
    /// How tokens were counted.
    pub(super) tokens: String,
}

impl Study {
    pub(super) fn dir(&self) -> PathBuf {
        self.data.clone().unwrap_or_else(data::data_dir)
    }

    fn minilm_dir(&self) -> Option<PathBuf> {
        minilm_dir(self.minilm_dir.clone())
    }

    /// The requests: the `--prompts` file, a prompt file of the data directory (one model's
    /// responses), or ShareGPT's turns cut to `engine`'s window.
    pub(super) fn workload(&self, engine: &EngineConfig) -> Result<Workload, LlmError> {
        let path = match (&self.prompts, self.dataset.file()) {
            (Some(p), _) => p.clone(),
            (None, Some(f)) => self.dir().join(f),
            (None, None) => return self.sharegpt_workload(engine),
        };
        let Some(model) = self.model.as_deref() else {
            let all = data::load_prompts(&path, None, self.strict)?;
            let models: std::collections::BTreeSet<&str> =
                all.records.iter().map(|r| r.model.as_str()).collect();
            return Err(LlmError::NoModel {
                path,
                models: models.into_iter().collect::<Vec<_>>().join(", "),
            });
        };
        let loaded = data::load_prompts(&path, Some(model), self.strict)?;
        for skipped in &loaded.skipped {
            tracing::warn!("skipped malformed line {skipped}");
        }
        if loaded.duplicates > 0 {
            tracing::info!(
                "{} repeated prompts of {model} dropped (each prompt appears once)",
                loaded.duplicates
            );
        }
        let name = match &self.prompts {
            Some(p) => p.display().to_string(),
            None => self.dataset.name().to_string(),
        };
        Ok(Workload {
            what: format!("{name} / {model}"),
            records: loaded.records,
            tokens: format!("tokens = words x {TOKENS_PER_WORD:.3}"),
        })
    }

    pub(super) fn sharegpt_workload(&self, engine: &EngineConfig) -> Result<Workload, LlmError> {
        let path = sharegpt::locate(self.sharegpt.as_deref())?;
        let data = sharegpt::read(&path, self.strict)?;
        for m in &data.malformed {
            tracing::warn!("skipped malformed record {m}");
        }
        let dir = self
            .minilm_dir()
            .ok_or(LlmError::NoMiniLmDir("counting ShareGPT's tokens"))?;
        let counter = load_wordpiece(&dir)?;
        let turns = sharegpt::turns(&data.conversations, counter.as_ref(), engine.max_model_len)?;
        let cut = data
            .cut_at
            .map_or_else(String::new, |at| format!(", file cut at byte {at}"));
        Ok(Workload {
            what: format!(
                "sharegpt: {} conversations read{cut}, {} malformed, {} turns",
                data.conversations.len(),
                data.malformed.len(),
                turns.records.len()
            ),
            records: turns.records,
            tokens: format!(
                "tokens = {}, {} contexts cut to the {}-token window",
                counter.name(),
                turns.truncated_contexts,
                engine.max_model_len
            ),
        })
    }

    /// The embedder asked for (see [`EmbeddingKind`]), with its vectors cached unless told not
    /// to; a cache that cannot be opened is a warning, not a failed run.
    pub fn embedder(&self) -> Result<Box<dyn Embedder>, LlmError> {
        let embedder = self.uncached_embedder()?;
        if self.no_embed_cache || embedder.cache_fingerprint().is_none() {
            return Ok(embedder);
        }
        let Some(dir) = self.embed_cache.clone().or_else(embed_cache::default_dir) else {
            tracing::warn!(
                "no cache folder (set XSCHED_CACHE_DIR or HOME): embedding every prompt"
            );
            return Ok(embedder);
        };
        // A failed wrap dropped the embedder: load it again (a second or so).
        match embed_cache::Cached::wrap(embedder, &dir) {
            Ok(cached) => Ok(cached),
            Err(e) => {
                tracing::warn!("{}; embedding every prompt", chain_text(&e));
                self.uncached_embedder()
            }
        }
    }

    fn uncached_embedder(&self) -> Result<Box<dyn Embedder>, LlmError> {
        let dir = self.minilm_dir();
        match (self.embedding, dir) {
            (EmbeddingKind::Hashed, _) => Ok(Box::new(Hashed)),
            (EmbeddingKind::MiniLm, None) => Err(LlmError::NoMiniLmDir("--embedding minilm")),
            (EmbeddingKind::MiniLm, Some(d)) => Ok(load_minilm(&d)?),
            (EmbeddingKind::Auto, Some(d)) => match load_minilm(&d) {
                Ok(m) => Ok(m),
                Err(e) => {
                    tracing::warn!(
                        "MiniLM unavailable ({}); using the built-in hashed embedding",
                        chain_text(&e)
                    );
                    Ok(Box::new(Hashed))
                }
            },
            (EmbeddingKind::Auto, None) => {
                tracing::warn!(
                    "no MiniLM model configured (--minilm-dir or XSCHED_MINILM_DIR); using the \
                     built-in hashed embedding"
                );
                Ok(Box::new(Hashed))
            }
        }
    }

    /// The arrival shape, and its name in the report.
    pub(super) fn arrival_shape(&self) -> Result<(ArrivalShape, String), LlmError> {
        let (path, unit) = match (&self.trace, self.arrivals.file()) {
            (Some(p), _) => (p.clone(), self.trace_unit),
            (None, Some(f)) => (self.dir().join(f), None),
            (None, None) => return Ok((ArrivalShape::Poisson, "poisson".into())),
        };
        let t = trace::load(&path, unit, self.strict)?;
        for s in &t.skipped {
            tracing::warn!("skipped malformed line {s}");
        }
        let name = match &self.trace {
            Some(p) => format!("trace {} ({})", p.display(), t.unit),
            None => self.arrivals.name().to_string(),
        };
        Ok((ArrivalShape::Trace(t.times), name))
    }
}
