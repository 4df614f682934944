//! What a study is asked (the prompt set, the arrivals, the embedding, the loads and the
//! engines).

use crate::trace;
use std::path::PathBuf;
use xsched_llm_core::RequestPolicySpec;
use xsched_llm_sim::sim::Cluster;

/// A prompt set: a prompt file of `../shared/data/llm`, or ShareGPT from its package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dataset {
    /// `prompts-arena-hard-1k.jsonl`.
    ArenaHard,
    /// `prompts-alpaca-eval.jsonl`.
    AlpacaEval,
    /// ShareGPT V3's turns (`crate::sharegpt`), tokens counted by MiniLM's WordPiece.
    ShareGpt,
}

impl Dataset {
    /// The prompt files of `../shared/data/llm`.
    pub const FILES: [Dataset; 2] = [Dataset::ArenaHard, Dataset::AlpacaEval];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::ArenaHard => "arena-hard",
            Dataset::AlpacaEval => "alpaca-eval",
            Dataset::ShareGpt => "sharegpt",
        }
    }

    /// Its file under the data directory (ShareGPT has none there: it is a package).
    pub(super) fn file(self) -> Option<&'static str> {
        match self {
            Dataset::ArenaHard => Some("llm/prompts-arena-hard-1k.jsonl"),
            Dataset::AlpacaEval => Some("llm/prompts-alpaca-eval.jsonl"),
            Dataset::ShareGpt => None,
        }
    }
}

/// When requests arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Poisson at each load's rate.
    Poisson,
    /// The inter-arrival gaps of Azure's 2023 conversation trace, scaled to each load's rate.
    AzureConv,
    /// The same for Azure's 2023 code trace.
    AzureCode,
}

impl Arrivals {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Poisson => "poisson",
            Arrivals::AzureConv => "azure-conv",
            Arrivals::AzureCode => "azure-code",
        }
    }

    pub(super) fn file(self) -> Option<&'static str> {
        let name = self.name();
        (crate::trace::NAMED.iter()).find_map(|&(n, file)| (n == name).then_some(file))
    }
}

/// Which prompt embedding the predictor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingKind {
    /// MiniLM when a model directory is configured and loads (and this build has it), else the
    /// hashed embedding, with one warning saying why.
    Auto,
    /// The built-in hashed n-gram embedding.
    Hashed,
    /// MiniLM, or an error.
    MiniLm,
}

/// What a study is asked.
#[derive(Clone, Debug)]
pub struct Study {
    /// Data directory (default: `XSCHED_DATA_DIR`, else `../shared/data`).
    pub data: Option<PathBuf>,
    /// The prompt set.
    pub dataset: Dataset,
    /// The model whose real responses give the output lengths.
    pub model: Option<String>,
    /// Policies.
    pub policies: Vec<RequestPolicySpec>,
    /// Loads as fractions of the engine's measured capacity.
    pub loads: Vec<f64>,
    /// Arrival shape.
    pub arrivals: Arrivals,
    /// Records (a seeded split, never measured) that fill the predictor's history first.
    pub warm: usize,
    /// The predictor's history capacity (entries).
    pub history: usize,
    /// Requests measured: a seeded sample of what the warm split leaves (`None`: all).
    pub requests: Option<usize>,
    /// Seed of the order, the warm split and the arrivals.
    pub seed: u64,
    /// Engine preset ([`EngineConfig::PRESETS`](xsched_llm_sim::engine::EngineConfig::PRESETS)).
    pub engine: String,
    /// Refuse malformed data lines instead of skipping them.
    pub strict: bool,
    /// Prompt embedding.
    pub embedding: EmbeddingKind,
    /// The MiniLM model directory (else `XSCHED_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
    /// Where MiniLM's vectors are kept between runs (`embed_cache.rs`; default
    /// [`embed_cache::default_dir`](xsched_llm_predict::embed_cache::default_dir)).
    pub embed_cache: Option<PathBuf>,
    /// Compute every vector, keeping none.
    pub no_embed_cache: bool,
    /// The ShareGPT file (else `XSCHED_SHAREGPT`, else the installed package's).
    pub sharegpt: Option<PathBuf>,
    /// A trace file whose arrival gaps shape the load (`crate::trace`), instead of `arrivals`.
    pub trace: Option<PathBuf>,
    /// The unit of its unsuffixed numeric times (default seconds).
    pub trace_unit: Option<trace::Unit>,
    /// A fixed-rate overload instead of the load sweep: Poisson arrivals at this many requests
    /// per second for this many seconds (the requests are a seeded sample).
    pub overload: Option<(f64, f64)>,
    /// Several engine instances behind a router instead of one engine.
    pub cluster: Option<Cluster>,
    /// Write the sweep's plots (SVG) into this directory.
    pub plot: Option<PathBuf>,
    /// A prompt file in the shared JSONL format (`source, model, prompt_id, prompt,
    /// response`) to use instead of the dataset.
    pub prompts: Option<PathBuf>,
}
