//! `xsched llm`'s sweep: every policy at every load (or one overload), its plots, and the
//! issue's targets checked at high load: SageSched against FCFS, the other baselines and the
//! oracle.

use super::contract::Study;
use crate::LlmError;
use crate::experiment::{self, ArrivalShape, SweepParams};
use xsched_llm_core::Placement;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::presets;
use xsched_llm_sim::sim::Cluster;
use xsched_report::{Check, Report, Verdict, columns};

/// `xsched llm`: every policy at every load, with the targets at high load.
pub fn sweep(s: &Study) -> Result<Report, LlmError> {
    let engine = sweep_engine(s)?;
    let workload = s.workload(&engine)?;
    let (arrivals, arrivals_name) = sweep_arrivals(s)?;
    let params = sweep_params(s, engine, arrivals);
    let embedder = s.embedder()?;
    let (cap, points) = experiment::sweep(&params, &workload.records, embedder.as_ref())?;
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
fn sweep_engine(s: &Study) -> Result<EngineConfig, LlmError> {
    let engine = EngineConfig::preset(&s.engine).ok_or_else(|| LlmError::UnknownEngine {
        name: s.engine.clone(),
    })?;
    if let Some(&bad) = s.loads.iter().find(|l| !l.is_finite() || **l <= 0.0) {
        return Err(LlmError::BadLoad(bad));
    }
    if let Some(c) = &s.cluster
        && c.instances == 0
    {
        return Err(LlmError::NoInstances);
    }
    if let Some((rate, duration)) = s.overload
        && !(rate.is_finite() && rate > 0.0 && duration.is_finite() && duration > 0.0)
    {
        return Err(LlmError::BadOverload { rate, duration });
    }
    Ok(engine)
}

/// The sweep's arrival shape and its name: Poisson at the overload's rate, else the study's.
fn sweep_arrivals(s: &Study) -> Result<(ArrivalShape, String), LlmError> {
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
) -> Result<(), LlmError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::{Arrivals, Dataset, EmbeddingKind};
    use std::path::PathBuf;
    use xsched_llm_core::RequestPolicySpec;

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
            embedding: EmbeddingKind::Hashed,
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
            Err(LlmError::UnknownEngine { .. })
        ));
        let load = Study {
            loads: vec![0.5, 0.0],
            ..study()
        };
        assert!(matches!(sweep(&load), Err(LlmError::BadLoad(_))));
        let missing = sweep(&study())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("/nonexistent"), "{missing}");
        let minilm = Study {
            embedding: EmbeddingKind::MiniLm,
            minilm_dir: None,
            embed_cache: None,
            no_embed_cache: false,
            ..study()
        };
        if std::env::var_os("XSCHED_MINILM_DIR").is_none() {
            assert!(matches!(minilm.embedder(), Err(LlmError::NoMiniLmDir(_))));
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
