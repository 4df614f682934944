//! `xsched llm replay`: a recorded request sequence (each request's arrival, prompt, and prompt
//! and answer tokens, as a benchmark client sent it to a real engine) through the engine
//! simulator under each policy, so the simulator's figures can be set beside the engine's for
//! the very same requests (docs/results/vllm.md, "SageSched on vLLM itself").

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use xsched_llm::replay::{self, ReplaySummary};
use xsched_llm_core::{EngineOrder, RequestPolicySpec};
use xsched_llm_predict::embedding::Embedder;
use xsched_llm_sim::Request;
use xsched_llm_sim::calibrate::fit_step_time;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::sim::{Cluster, DEFAULT_HISTORY, Rules, Runs};

use crate::embedding_arg::EmbeddingArgs;

/// Where the simulated scheduler orders requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReplayOrderAt {
    /// In the scheduler's queue, admitting as the engine has room (`--order-at gateway`).
    Gateway,
    /// In the engine's own priority queue, every request sent at once (`--order-at engine`).
    Engine,
}

/// `xsched llm replay`'s arguments.
#[derive(Args)]
pub struct ReplayArgs {
    /// The requests: JSON lines with `arrival` (seconds), `prompt`, `input_tokens` and
    /// `output_tokens`.
    #[arg(long, value_name = "FILE")]
    requests: PathBuf,
    /// Requests whose answers fill the history predictor first (the same fields; their
    /// arrivals are ignored).
    #[arg(long, value_name = "FILE")]
    warm: Option<PathBuf>,
    /// Engine preset (`xsched llm presets` lists them).
    #[arg(long, default_value = "smollm2-135m-cpu")]
    engine: String,
    /// Its most requests at once (`--max-num-seqs`; default: the preset's).
    #[arg(long)]
    max_num_seqs: Option<usize>,
    /// Its step time `β0,β1,β2` in µs (a step, a prompt token, a decoding request), fitted on
    /// the machine the requests ran on (`scripts/llm/vllm-sim-compare.py fit DIR`); default:
    /// the preset's.
    #[arg(long, value_name = "B0,B1,B2", value_parser = parse_step_us)]
    step_us: Option<[f64; 3]>,
    /// Policies, comma-separated.
    #[arg(long, default_value = "fcfs,sagesched,sagesched-oracle")]
    policy: String,
    /// Where the policy's order acts.
    #[arg(long, value_enum, default_value = "engine")]
    order_at: ReplayOrderAt,
    /// With --order-at engine: seconds by which a request the policy ranks last may be passed
    /// by requests arriving after it (as `xsched llm serve --engine-horizon`).
    #[arg(long, default_value_t = EngineOrder::default().horizon_s,
          value_parser = crate::gateway_cmd::seconds)]
    engine_horizon: f64,
    /// Fit the step time first, so that POLICY replays these requests with the mean TTLT (s)
    /// the real engine gave them (`scripts/llm/vllm-replay.py` measures it), then replay every
    /// policy with it: `fcfs=100.5`. The attention term β3 is fitted where the engine is
    /// slower than the preset's other terms say; where it is faster even with β3 = 0, the
    /// preset's β0–β2 are scaled by one factor (`beta_scale` in the fit's line).
    #[arg(long, value_name = "POLICY=SECONDS", value_parser = parse_fit)]
    fit_mean_ttlt: Option<(RequestPolicySpec, f64)>,
    #[command(flatten)]
    embedding: EmbeddingArgs,
}

/// `POLICY=SECONDS`: a policy and a positive mean TTLT.
fn parse_fit(text: &str) -> Result<(RequestPolicySpec, f64), String> {
    let (policy, seconds) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("POLICY=SECONDS was expected: `{text}`"))?;
    let policy = policy.parse().map_err(|e| format!("{e}"))?;
    match seconds.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok((policy, s)),
        _ => Err(format!("`{seconds}` is not a positive number of seconds")),
    }
}

/// Three finite, non-negative numbers, comma-separated.
fn parse_step_us(text: &str) -> Result<[f64; 3], String> {
    let parts: Vec<f64> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>().map_err(|e| format!("`{p}`: {e}")))
        .collect::<Result<_, _>>()?;
    match parts[..] {
        [b0, b1, b2] if parts.iter().all(|b| b.is_finite() && *b >= 0.0) => Ok([b0, b1, b2]),
        _ => Err(format!(
            "three step-time terms in µs, each finite and not negative, were expected: `{text}`"
        )),
    }
}

/// The file's requests in arrival order, each prompt embedded by `embedder`.
fn read(path: &Path, embedder: &dyn Embedder) -> Result<Vec<Request>> {
    let recorded = xsched_llm::recorded::read(path)?;
    replay::requests(&recorded, embedder).with_context(|| path.display().to_string())
}

/// The engine preset with the arguments' changes.
fn engine(a: &ReplayArgs) -> Result<EngineConfig> {
    let cfg = EngineConfig::preset(&a.engine)
        .with_context(|| format!("no engine preset `{}`", a.engine))?;
    Ok(cfg.with_overrides(a.max_num_seqs, a.step_us))
}

/// The simulator on one engine `cfg`, its predictor filled by `warm` first.
fn runs<'a>(cfg: &'a EngineConfig, warm: &'a [Request]) -> Runs<'a> {
    Runs {
        cfg,
        cluster: Cluster::SINGLE,
        history: DEFAULT_HISTORY,
        warm,
    }
}

/// One policy's replay as a JSON line: mean and P99 TTLT, mean TTFT, and each request's TTLT in
/// arrival order.
fn line(name: &str, summary: &ReplaySummary) -> serde_json::Value {
    serde_json::json!({
        "policy": name,
        "completed": summary.completed,
        "mean_ttlt": summary.mean_ttlt,
        "p99_ttlt": summary.p99_ttlt,
        "mean_ttft": summary.mean_ttft,
        "ttlt": summary.ttlt,
    })
}

/// Replay and print one JSON line per policy (after the fit's line, with --fit-mean-ttlt).
pub fn replay(a: &ReplayArgs) -> Result<()> {
    let embedder = a.embedding.embedder()?;
    let requests = read(&a.requests, embedder.as_ref())?;
    let warm = match a.warm.as_deref() {
        Some(path) => read(path, embedder.as_ref())?,
        None => Vec::new(),
    };
    let mut cfg = engine(a)?;
    let rules = Rules {
        engine_order: (a.order_at == ReplayOrderAt::Engine).then(|| EngineOrder {
            horizon_s: a.engine_horizon,
            ..EngineOrder::default()
        }),
        ..Rules::default()
    };
    if let Some((policy, target)) = a.fit_mean_ttlt {
        let fit = fit_step_time(&runs(&cfg, &warm), policy, &rules, &requests, target)?;
        cfg = fit.applied(&cfg);
        let line = serde_json::json!({"fit": {
            "policy": policy.to_string(), "target_mean_ttlt": target,
            "attend_us": fit.attend_us, "beta_scale": fit.beta_scale,
            "mean_ttlt": fit.mean_ttlt, "reached": fit.reached,
        }});
        println!("{line}");
    }
    let names: Vec<&str> = a.policy.split(',').filter(|p| !p.is_empty()).collect();
    for (name, policy) in xsched_llm_core::policy::parse_list(&names)? {
        let run = runs(&cfg, &warm).simulate(policy, &rules, &requests)?;
        println!("{}", line(name, &replay::summarize(&run, requests.len())));
    }
    Ok(())
}
