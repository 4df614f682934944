//! Load sweeps: policies side by side on the same workloads.
//!
//! *Load* is offered work over the engine's measured capacity: capacity is the saturated
//! throughput (requests/s) of the same requests all arriving at once under FCFS, counted from
//! the 10th to the 90th percentile completion (see [`capacity`]), and a load `L` offers
//! requests at `L × capacity` per second: Poisson arrivals, or a real trace's inter-arrival
//! gaps (Azure) scaled to that mean rate, which keeps the trace's burstiness. Each request's
//! prompt appears once (no repeats); the predictor learns online from completed requests only.

use crate::LlmError;
use crate::data::PromptRecord;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::sync::Arc;
use xsched_llm_core::RequestPolicySpec;
use xsched_llm_predict::embedding::Embedder;
use xsched_llm_sim::Request;
use xsched_llm_sim::engine::{EngineConfig, RunStats};
use xsched_llm_sim::sim::{self, Cluster};
use xsched_report::{Row, quantile, round3};

/// What a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepParams {
    /// Engine preset.
    pub engine: EngineConfig,
    /// Loads (fractions of capacity).
    pub loads: Vec<f64>,
    /// Policies.
    pub policies: Vec<RequestPolicySpec>,
    /// Predictor history capacity.
    pub history: usize,
    /// Seed of the request order and arrivals.
    pub seed: u64,
    /// How requests arrive.
    pub arrivals: ArrivalShape,
    /// Records (a seeded random split, disjoint from the measured workload) whose true lengths
    /// fill the predictor's history before each run; 0 learns online only.
    pub warm: usize,
    /// Requests measured (a seeded sample of what the warm split leaves); `None`: all.
    pub requests: Option<usize>,
    /// A fixed arrival rate (requests/s) instead of `loads`: one point, at load rate/capacity.
    pub rate: Option<f64>,
    /// Several instances behind a router instead of one engine (capacity then counts them all).
    pub cluster: Option<Cluster>,
}

/// The shape of the arrival process; its rate is set by the load.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrivalShape {
    /// Exponential gaps.
    Poisson,
    /// A real trace's arrival times (seconds, ascending): its gaps in order, from the start,
    /// scaled so their mean gives the wanted rate (wrapping around if the trace is shorter).
    Trace(Vec<f64>),
}

impl ArrivalShape {
    /// `n` arrival times at a mean `rate` per second (all at 0 when `rate` is 0).
    fn times(&self, n: usize, rate: f64, rng: &mut Pcg64Mcg) -> Vec<f64> {
        let gaps: Vec<f64> = match self {
            ArrivalShape::Trace(t) if t.len() >= 2 => {
                let raw: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
                let used: Vec<f64> = (0..n).map(|i| raw[i % raw.len()]).collect();
                let mean = used.iter().sum::<f64>() / n.max(1) as f64;
                let scale = if mean > 0.0 && rate > 0.0 {
                    1.0 / (rate * mean)
                } else {
                    0.0
                };
                used.into_iter().map(|g| g * scale).collect()
            }
            _ => (0..n)
                .map(|_| {
                    let u: f64 = rng.random_range(f64::EPSILON..1.0);
                    if rate > 0.0 { -u.ln() / rate } else { 0.0 }
                })
                .collect(),
        };
        let mut t = 0.0;
        gaps.into_iter()
            .map(|g| {
                t += g;
                t
            })
            .collect()
    }
}

/// One policy at one load.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Preemptions by recompute (the engine's, KV exhausted).
    pub preemptions: u64,
    /// Tokens whose KV was dropped and computed again.
    pub wasted_tokens: u64,
    /// Running requests the policy paused.
    pub pauses: u64,
    /// Tokens of KV those pauses swapped to host memory.
    pub swapped_tokens: u64,
    /// The longest wait relative to the request's own service: max over requests of
    /// (TTLT − its time alone on the engine) / its time alone.
    pub max_relative_wait: f64,
    /// Requests refused (larger than the KV pool).
    pub refused: u64,
    /// Mean wall-clock time the scheduler spent per request (µs): every call it took, from
    /// arrival to completion, the predictor's lookups not included.
    pub sched_mean_us: f64,
    /// Its P99 (µs).
    pub sched_p99_us: f64,
    /// Mean wall-clock time of one prediction (µs; 0 for a policy that predicts nothing).
    pub predict_mean_us: f64,
    /// Every completed request's TTLT (s), ascending (for the CDF plot; not in reports).
    #[serde(skip)]
    pub ttlts: Vec<f64>,
}

/// Requests from records (with their embeddings, index for index) in a seeded order, arriving
/// at `rate` per second in the given shape.
pub fn workload(
    records: &[PromptRecord],
    embeddings: &[Arc<[f32]>],
    rate: f64,
    seed: u64,
    shape: &ArrivalShape,
) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut order: Vec<(&PromptRecord, &Arc<[f32]>)> = records.iter().zip(embeddings).collect();
    order.shuffle(&mut rng);
    let times = shape.times(order.len(), rate, &mut rng);
    order
        .into_iter()
        .zip(times)
        .enumerate()
        .map(|(id, ((r, e), arrival))| Request {
            id,
            arrival,
            prompt: r.prompt.clone(),
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            previous_answer_tokens: r.previous_answer_tokens,
            embedding: e.clone(),
        })
        .collect()
}

/// Requests per second the engine sustains on these records (all arriving at once, FCFS).
pub fn capacity(engine: &EngineConfig, records: &[PromptRecord], seed: u64) -> f64 {
    let none: Vec<Arc<[f32]>> = records.iter().map(|_| Arc::from(Vec::new())).collect();
    let all = workload(records, &none, 0.0, seed, &ArrivalShape::Poisson);
    sim::simulate(
        engine,
        Cluster::SINGLE,
        RequestPolicySpec::FCFS,
        0,
        &[],
        &all,
    )
    .map_or(0.0, |run| saturated_rate(&run.stats))
}

/// Completions per second between the 10th and the 90th percentile completion: the rate while
/// the engine is saturated, without the start (the first batch still prefilling) or the drain
/// (the last long requests decoding nearly alone, which in a short run would dominate).
fn saturated_rate(stats: &RunStats) -> f64 {
    let mut done: Vec<f64> = stats.outcomes.iter().map(|o| o.ttlt).collect();
    done.sort_by(f64::total_cmp);
    let n = done.len();
    if n < 10 {
        return n as f64 / stats.makespan.max(1e-9);
    }
    let (lo, hi) = (n / 10, n * 9 / 10);
    (hi - lo) as f64 / (done[hi] - done[lo]).max(1e-9)
}

fn summarize(
    policy: &RequestPolicySpec,
    load: f64,
    run: &sim::SimRun,
    requests: &[Request],
    engine: &EngineConfig,
) -> Point {
    let stats = &run.stats;
    let n = stats.outcomes.len().max(1) as f64;
    let us = |ns: &[u64]| -> Vec<f64> { ns.iter().map(|&n| n as f64 / 1e3).collect() };
    let (sched, predict) = (us(&run.scheduler_ns), us(&run.predict_ns));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let ttlt: Vec<f64> = stats.outcomes.iter().map(|o| o.ttlt).collect();
    let p99 = quantile(&ttlt, 0.99).unwrap_or(0.0);
    Point {
        policy: policy.to_string(),
        load,
        ttlt_mean_ms: round3(ttlt.iter().sum::<f64>() / n * 1e3),
        ttlt_p99_ms: round3(p99 * 1e3),
        ttft_mean_ms: round3(stats.outcomes.iter().map(|o| o.ttft).sum::<f64>() / n * 1e3),
        throughput_rps: round3(stats.outcomes.len() as f64 / stats.makespan.max(1e-9)),
        preemptions: stats.preemptions,
        wasted_tokens: stats.wasted_tokens,
        pauses: stats.pauses,
        swapped_tokens: stats.swapped_tokens,
        max_relative_wait: round3(
            stats
                .outcomes
                .iter()
                .map(|o| {
                    let r = &requests[o.id];
                    let solo = engine.solo_seconds(r.input_tokens, r.output_tokens);
                    (o.ttlt - solo).max(0.0) / solo.max(1e-9)
                })
                .fold(0.0, f64::max),
        ),
        refused: stats.refused,
        sched_mean_us: round3(mean(&sched)),
        sched_p99_us: round3(quantile(&sched, 0.99).unwrap_or(0.0)),
        predict_mean_us: if policy.predicts() {
            round3(mean(&predict))
        } else {
            0.0
        },
        ttlts: {
            let mut t = ttlt.clone();
            t.sort_by(f64::total_cmp);
            t
        },
    }
}

/// Mixed into the seed of the warm/measured split, so it is independent of the arrival order.
const WARM_SPLIT_SEED: u64 = 0x5741_524d;

/// Every policy at every load on `records` (less the warm split).
pub fn sweep(
    p: &SweepParams,
    records: &[PromptRecord],
    embedder: &dyn Embedder,
) -> Result<(f64, Vec<Point>), LlmError> {
    if p.warm >= records.len() {
        return Err(LlmError::NothingToMeasure {
            warm: p.warm,
            records: records.len(),
        });
    }
    let shuffled = crate::data::shuffle_by_conversation(records, p.seed ^ WARM_SPLIT_SEED);
    let rest = &shuffled[p.warm..];
    let rest = &rest[..p.requests.unwrap_or(rest.len()).min(rest.len())];
    let (warm, measured): (Vec<PromptRecord>, Vec<PromptRecord>) = (
        shuffled[..p.warm].iter().map(|r| (*r).clone()).collect(),
        rest.iter().map(|r| (*r).clone()).collect(),
    );
    let embed = |rs: &[PromptRecord]| -> Vec<Arc<[f32]>> {
        rs.iter().map(|r| embedder.embed(&r.prompt)).collect()
    };
    let warm = workload(&warm, &embed(&warm), 0.0, p.seed, &ArrivalShape::Poisson);
    let cluster = p.cluster.unwrap_or(Cluster::SINGLE);
    let cap = capacity(&p.engine, &measured, p.seed) * cluster.instances.max(1) as f64;
    let embeddings = embed(&measured);
    let mut points = Vec::new();
    let loads = match p.rate {
        Some(rate) => vec![round3(rate / cap)],
        None => p.loads.clone(),
    };
    for &load in &loads {
        let rate = p.rate.unwrap_or(load * cap);
        let requests = workload(&measured, &embeddings, rate, p.seed, &p.arrivals);
        for spec in &p.policies {
            let run = sim::simulate(&p.engine, cluster, *spec, p.history, &warm, &requests)?;
            points.push(summarize(spec, load, &run, &requests, &p.engine));
        }
    }
    Ok((cap, points))
}

/// A point as a report row.
pub fn row(p: &Point) -> Row {
    xsched_report::row(p)
}

/// The lowest load where FCFS's mean TTLT is at least twice its value at the lowest load.
pub fn high_load(points: &[Point]) -> Option<f64> {
    let fcfs: Vec<&Point> = points.iter().filter(|p| p.policy == "fcfs").collect();
    let base = fcfs.first()?.ttlt_mean_ms;
    fcfs.iter()
        .find(|p| p.ttlt_mean_ms >= 2.0 * base)
        .map(|p| p.load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_keeps_its_gaps_and_is_scaled_to_the_rate() {
        let trace = ArrivalShape::Trace(vec![0.0, 1.0, 4.0, 5.0]); // gaps 1, 3, 1
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let t = trace.times(3, 2.0, &mut rng); // mean gap 0.5 s
        let expect = [0.3, 1.2, 1.5];
        assert!(
            t.iter().zip(expect).all(|(a, b)| (a - b).abs() < 1e-12),
            "{t:?}"
        );
        let wrapped = trace.times(4, 1.0, &mut rng);
        assert_eq!(wrapped.len(), 4, "a short trace wraps around");
    }

    #[test]
    fn poisson_arrivals_have_the_asked_mean_rate() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let t = ArrivalShape::Poisson.times(20_000, 4.0, &mut rng);
        let rate = t.len() as f64 / t[t.len() - 1];
        assert!((rate - 4.0).abs() < 0.1, "{rate}");
    }
}
