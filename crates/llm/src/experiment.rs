//! Load sweeps: policies side by side on the same workloads.
//!
//! *Load* is offered work over the engine's measured capacity: capacity is the throughput
//! (requests/s) of the same requests all arriving at once under FCFS, and a load `L` draws
//! Poisson arrivals at `L × capacity`. Each request's prompt appears once (no repeats); the
//! predictor learns online from completed requests only.

use crate::Request;
use crate::data::PromptRecord;
use crate::embedding::Embedder;
use crate::engine::{EngineConfig, RunStats, simulate};
use crate::policy;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// What a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepParams {
    /// Engine preset.
    pub engine: EngineConfig,
    /// Loads (fractions of capacity).
    pub loads: Vec<f64>,
    /// Policy names.
    pub policies: Vec<String>,
    /// Predictor history capacity.
    pub history: usize,
    /// Seed of the request order and arrivals.
    pub seed: u64,
}

/// One policy at one load.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Policy name.
    pub policy: String,
    /// Load.
    pub load: f64,
    /// Mean time to last token (ms).
    pub ttlt_mean_ms: f64,
    /// P99 time to last token (ms).
    pub ttlt_p99_ms: f64,
    /// Mean time to first token (ms).
    pub ttft_mean_ms: f64,
    /// Completed requests per second.
    pub throughput_rps: f64,
    /// Preemptions by recompute.
    pub preemptions: u64,
}

/// Requests from records (with their embeddings, index for index) in a seeded order, arriving
/// as a Poisson process at `rate` per second.
pub fn workload(
    records: &[PromptRecord],
    embeddings: &[Arc<[f32]>],
    rate: f64,
    seed: u64,
) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut order: Vec<(&PromptRecord, &Arc<[f32]>)> = records.iter().zip(embeddings).collect();
    order.shuffle(&mut rng);
    let mut t = 0.0;
    order
        .into_iter()
        .enumerate()
        .map(|(id, (r, e))| {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            if rate > 0.0 {
                t += -u.ln() / rate;
            }
            Request {
                id,
                arrival: t,
                prompt: r.prompt.clone(),
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                embedding: e.clone(),
            }
        })
        .collect()
}

/// Requests per second the engine sustains on these records (all arriving at once, FCFS).
pub fn capacity(engine: &EngineConfig, records: &[PromptRecord], seed: u64) -> f64 {
    let none: Vec<Arc<[f32]>> = records.iter().map(|_| Arc::from(Vec::new())).collect();
    let all = workload(records, &none, 0.0, seed);
    let stats = simulate(engine, &all, &mut policy::Fcfs);
    stats.outcomes.len() as f64 / stats.makespan.max(1e-9)
}

fn summarize(policy: &str, load: f64, stats: &RunStats) -> Point {
    let n = stats.outcomes.len().max(1) as f64;
    let mut ttlt: Vec<f64> = stats.outcomes.iter().map(|o| o.ttlt).collect();
    ttlt.sort_by(f64::total_cmp);
    let p99 = ttlt
        .get(((ttlt.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0);
    let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
    Point {
        policy: policy.to_string(),
        load,
        ttlt_mean_ms: r3(ttlt.iter().sum::<f64>() / n * 1e3),
        ttlt_p99_ms: r3(p99 * 1e3),
        ttft_mean_ms: r3(stats.outcomes.iter().map(|o| o.ttft).sum::<f64>() / n * 1e3),
        throughput_rps: r3(stats.outcomes.len() as f64 / stats.makespan.max(1e-9)),
        preemptions: stats.preemptions,
    }
}

/// Every policy at every load on `records`. Unknown policy names are an error naming them.
pub fn sweep(
    p: &SweepParams,
    records: &[PromptRecord],
    embedder: &dyn Embedder,
) -> Result<(f64, Vec<Point>), String> {
    for name in &p.policies {
        if policy::by_name(name, 1).is_none() {
            return Err(format!(
                "unknown policy `{name}`; known: {}",
                policy::NAMES.join(", ")
            ));
        }
    }
    let cap = capacity(&p.engine, records, p.seed);
    let embeddings: Vec<Arc<[f32]>> = records.iter().map(|r| embedder.embed(&r.prompt)).collect();
    let mut points = Vec::new();
    for &load in &p.loads {
        let requests = workload(records, &embeddings, load * cap, p.seed);
        for name in &p.policies {
            let mut pol = policy::by_name(name, p.history)
                .ok_or_else(|| format!("unknown policy `{name}`"))?;
            let stats = simulate(&p.engine, &requests, pol.as_mut());
            points.push(summarize(name, load, &stats));
        }
    }
    Ok((cap, points))
}

/// A point as a JSON row.
pub fn row(p: &Point) -> Map<String, Value> {
    let v = json!({
        "policy": p.policy, "load": p.load, "ttlt_mean_ms": p.ttlt_mean_ms,
        "ttlt_p99_ms": p.ttlt_p99_ms, "ttft_mean_ms": p.ttft_mean_ms,
        "throughput_rps": p.throughput_rps, "preemptions": p.preemptions,
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The lowest load where FCFS's mean TTLT is at least twice its value at the lowest load.
pub fn high_load(points: &[Point]) -> Option<f64> {
    let fcfs: Vec<&Point> = points.iter().filter(|p| p.policy == "fcfs").collect();
    let base = fcfs.first()?.ttlt_mean_ms;
    fcfs.iter()
        .find(|p| p.ttlt_mean_ms >= 2.0 * base)
        .map(|p| p.load)
}
