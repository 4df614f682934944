//! `xsched llm replay`: a recorded request sequence (each request's arrival, prompt, and prompt
//! and answer tokens, as a benchmark client sent it to a real engine) through the engine
//! simulator under each policy, so the simulator's figures can be set beside the engine's for
//! the very same requests (docs/results/vllm.md, "SageSched on vLLM itself").

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use xsched_llm::Request;
use xsched_llm::engine::EngineConfig;
use xsched_llm::sim::{Cluster, Rules, Runs};
use xsched_llm_core::{EngineOrder, RequestPolicySpec};
use xsched_llm_predict::embedding::{Embedder, Hashed};

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

fn read(path: &Path) -> Result<Vec<Request>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (k, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let at = || format!("{} line {}", path.display(), k + 1);
        let v: serde_json::Value = serde_json::from_str(line).with_context(at)?;
        let tokens = |field: &str| {
            v.get(field)
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .with_context(|| format!("{}: `{field}` is not a token count", at()))
        };
        let arrival = v
            .get("arrival")
            .map_or(Some(0.0), serde_json::Value::as_f64);
        let Some(arrival) = arrival.filter(|t| t.is_finite() && *t >= 0.0) else {
            bail!("{}: `arrival` is not a time in seconds", at());
        };
        let prompt = v.get("prompt").and_then(|p| p.as_str()).unwrap_or_default();
        out.push(Request {
            id: out.len(),
            arrival,
            embedding: Hashed.embed(prompt),
            prompt: prompt.to_owned(),
            input_tokens: tokens("input_tokens")?,
            output_tokens: tokens("output_tokens")?.max(1),
            previous_answer_tokens: None,
        });
    }
    out.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    for (k, r) in out.iter_mut().enumerate() {
        r.id = k;
    }
    Ok(out)
}

/// Replay and print one JSON line per policy: mean and P99 TTLT, mean TTFT, and each request's
/// TTLT in arrival order.
pub fn replay(a: &ReplayArgs) -> Result<()> {
    let requests = read(&a.requests)?;
    let warm = a.warm.as_deref().map(read).transpose()?.unwrap_or_default();
    let mut cfg = EngineConfig::preset(&a.engine)
        .with_context(|| format!("no engine preset `{}`", a.engine))?;
    if let Some(n) = a.max_num_seqs {
        cfg.max_num_seqs = n.max(1);
    }
    if let Some(beta) = a.step_us {
        cfg.beta_us = beta;
    }
    let rules = Rules {
        engine_order: (a.order_at == ReplayOrderAt::Engine).then(|| EngineOrder {
            horizon_s: a.engine_horizon,
            ..EngineOrder::default()
        }),
        ..Rules::default()
    };
    let runs = Runs {
        cfg: &cfg,
        cluster: Cluster::SINGLE,
        history: 10_000,
        warm: &warm,
    };
    for name in a.policy.split(',').filter(|p| !p.is_empty()) {
        let policy: RequestPolicySpec = name.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        let run = runs.simulate(policy, &rules, &requests)?;
        let mut ttlt = vec![f64::NAN; requests.len()];
        let mut ttft = 0.0;
        for o in &run.stats.outcomes {
            ttlt[o.id] = o.ttlt;
            ttft += o.ttft;
        }
        let n = run.stats.outcomes.len().max(1);
        let mut sorted: Vec<f64> = ttlt.iter().copied().filter(|t| t.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let p99 = sorted
            .get(((0.99 * sorted.len() as f64) as usize).min(sorted.len().saturating_sub(1)))
            .copied();
        let line = serde_json::json!({
            "policy": name,
            "completed": run.stats.outcomes.len(),
            "mean_ttlt": sorted.iter().sum::<f64>() / n as f64,
            "p99_ttlt": p99,
            "mean_ttft": ttft / n as f64,
            "ttlt": ttlt,
        });
        println!("{line}");
    }
    Ok(())
}
