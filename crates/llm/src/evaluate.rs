//! How good and how fast the predictor is (`xsched llm predict-eval`).
//!
//! Accuracy is measured online, as the scheduler would use it: requests in a seeded order, each
//! predicted from the history of those before it, then learned. Reported: the fraction whose
//! predicted median is within 2× of the truth, and the Spearman rank correlation between the
//! predicted mean and the truth. Latency is wall-clock per prediction against a full history.

use crate::data::PromptRecord;
use crate::embedding::Embedder;
use crate::predictor::Predictor;
use std::sync::Arc;
use std::time::Instant;
use xsched_report::quantile;

/// Predictor quality and cost.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictEval {
    /// Requests evaluated.
    pub requests: usize,
    /// Fraction with the predicted median within 2× of the true length.
    pub within_2x: f64,
    /// Spearman rank correlation of predicted mean and true length.
    pub spearman: f64,
    /// The same two for the history-free baseline (every request predicted as the global
    /// median so far): what the history adds.
    pub baseline_within_2x: f64,
    /// History entries when latency was measured.
    pub history: usize,
    /// History lookup latency P50 (µs), the prompt already embedded.
    pub latency_p50_us: f64,
    /// History lookup latency P99 (µs), the prompt already embedded.
    pub latency_p99_us: f64,
    /// Of the neighbours found with the full history, the fraction as similar as an exact
    /// scan's (1 where the history is scanned exactly).
    pub recall: f64,
    /// Embedding latency P50 (µs) of the embedder used.
    pub embed_p50_us: f64,
    /// One scheduling step's ranking of 10 000 waiting requests under `sagesched` (µs, median
    /// of 5): every Gittins index computed, then sorted.
    pub step_10k_us: f64,
}

/// Median time (µs) of ranking and sorting `n` waiting requests under `sagesched`, whose
/// predictions come from `pool` (cycled to reach `n`; each request is distinct by id).
pub fn step_latency(pool: &[PromptRecord], n: usize) -> f64 {
    let Some(mut policy) = crate::policy::by_name(
        "sagesched",
        10_000,
        &crate::engine::EngineConfig::default_preset(),
    ) else {
        return 0.0;
    };
    let requests: Vec<crate::Request> = (0..n)
        .filter_map(|id| {
            let r = pool.get(id % pool.len().max(1))?;
            Some(crate::Request {
                id,
                arrival: 0.0,
                prompt: r.prompt.clone(),
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                previous_answer_tokens: r.previous_answer_tokens,
                embedding: crate::embedding::Hashed.embed(&r.prompt),
            })
        })
        .collect();
    for r in requests.iter().take(10_000) {
        policy.complete(r);
    }
    for r in &requests {
        policy.arrive(r);
    }
    let times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut order: Vec<(f64, usize)> = requests
                .iter()
                .map(|r| {
                    let v = crate::policy::View {
                        req: r,
                        generated: 0,
                        started: false,
                        now: 0.0,
                    };
                    (policy.rank(&v), r.id)
                })
                .collect();
            order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            std::hint::black_box(&order);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    quantile(&times, 0.5).unwrap_or(0.0)
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman rank correlation (0 when undefined).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    if va == 0.0 || vb == 0.0 {
        0.0
    } else {
        cov / (va * vb).sqrt()
    }
}

fn median(d: &xsched_core::gittins::SizeDistribution) -> f64 {
    let mut acc = 0.0;
    for &(s, p) in d.atoms() {
        acc += p;
        if acc >= 0.5 {
            return s;
        }
    }
    d.max()
}

/// Evaluate on `records` (online, in a seeded order, the first `warm` only learned) and time
/// predictions against a history filled from `latency_pool` (up to `history` entries).
pub fn evaluate(
    records: &[PromptRecord],
    latency_pool: &[PromptRecord],
    history: usize,
    warm: usize,
    seed: u64,
    embedder: &dyn Embedder,
) -> PredictEval {
    let order = crate::data::shuffle_by_conversation(records, seed);
    let mut p = Predictor::new(history);
    let (mut means, mut truth) = (Vec::new(), Vec::new());
    let (mut within, mut base_within) = (0usize, 0usize);
    let mut seen: Vec<f64> = Vec::new(); // true lengths so far, ascending
    let own: Vec<Arc<[f32]>> = order.iter().map(|r| embedder.embed(&r.prompt)).collect();
    for (k, (r, e)) in order.iter().zip(&own).enumerate() {
        let e = e.clone();
        if k < warm {
            // The warm split: learned, never scored.
            let t = f64::from(r.output_tokens);
            let at = seen.partition_point(|x| *x < t);
            seen.insert(at, t);
            p.learn(e, r.output_tokens);
            continue;
        }
        let d = p.predict(&e, r.previous_answer_tokens);
        let t = f64::from(r.output_tokens);
        let m = median(&d);
        within += usize::from(m <= 2.0 * t && t <= 2.0 * m);
        if let Some(&g) = seen.get(seen.len() / 2) {
            base_within += usize::from(g <= 2.0 * t && t <= 2.0 * g);
        }
        means.push(d.mean());
        truth.push(t);
        // Kept sorted, so the median so far is its middle element.
        let at = seen.partition_point(|x| *x < t);
        seen.insert(at, t);
        p.learn(e, r.output_tokens);
    }
    let mut full = Predictor::new(history);
    // The history is the prompts' own vectors after the first QUERIES, cycled up to the
    // capacity (embedding 100 k prompts with a model would take an hour and measures the model,
    // not the lookup), with the pool's lengths; the first QUERIES are the lookups, so none of
    // them finds itself (which would make the recall trivially 1).
    const QUERIES: usize = 500;
    let (queries, stored) = own.split_at(QUERIES.min(own.len() / 2));
    for i in 0..history {
        let Some(e) = stored.get(i % stored.len().max(1)) else {
            break;
        };
        full.learn(
            e.clone(),
            latency_pool.get(i).map_or(1, |r| r.output_tokens),
        );
    }
    let lat: Vec<f64> = queries
        .iter()
        .map(|e| {
            let t = Instant::now();
            let d = full.predict(e, None);
            std::hint::black_box(d);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let at = |q: f64| quantile(&lat, q).unwrap_or(0.0);
    let recall = full.recall(&queries.iter().take(50).cloned().collect::<Vec<_>>());
    let n = order.len().saturating_sub(warm).max(1) as f64;
    PredictEval {
        requests: order.len().saturating_sub(warm),
        within_2x: within as f64 / n,
        spearman: spearman(&means, &truth),
        baseline_within_2x: base_within as f64 / (n - 1.0).max(1.0),
        history: full.len(),
        latency_p50_us: at(0.5),
        latency_p99_us: at(0.99),
        recall,
        step_10k_us: step_latency(latency_pool, 10_000),
        embed_p50_us: {
            let t: Vec<f64> = order
                .iter()
                .take(50)
                .map(|r| {
                    let t = Instant::now();
                    std::hint::black_box(embedder.embed(&r.prompt));
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            quantile(&t, 0.5).unwrap_or(0.0)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_and_reversed() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&a, &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    }
}
