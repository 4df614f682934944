//! How good and how fast the predictor is (`xsched llm predict-eval`).
//!
//! Accuracy is measured online, as the scheduler would use it: requests in a seeded order, each
//! predicted from the history of those before it, then learned. Reported: the fraction whose
//! predicted median is within 2× of the truth, and the Spearman rank correlation between the
//! predicted mean and the truth. Latency is wall-clock per prediction against a full history.

use crate::data::PromptRecord;
use std::sync::Arc;
use std::time::Instant;
use xsched_llm_core::predict::{Features, Predictor};
use xsched_llm_core::service::ServiceModel;
use xsched_llm_core::{
    Arrival, Config, EngineLimits, Input, Placement, RequestPolicySpec, RequestScheduler, Router,
    SizeDistribution,
};
use xsched_llm_predict::embedding::{Embedder, Hashed};
use xsched_llm_predict::predictor::History;
use xsched_llm_predict::regression::LengthModel;
use xsched_llm_sim::engine::EngineConfig;
use xsched_report::quantile;

/// How well requests were predicted online, each from the answers before it.
#[derive(Clone, Debug, PartialEq)]
pub struct Online {
    /// Requests evaluated.
    pub requests: usize,
    /// Fraction with the predicted median within 2× of the true length.
    pub within_2x: f64,
    /// Spearman rank correlation of predicted mean and true length.
    pub spearman: f64,
    /// The same two for the history-free baseline (every request predicted as the global
    /// median so far, the prior's median before any answer): what the history adds.
    pub baseline_within_2x: f64,
    /// See [`Online::baseline_within_2x`].
    pub baseline_spearman: f64,
}

/// Predict `order` online (embedded as `own`, in that order) with `p`: each request from the
/// answers before it, then learned; the first `warm` only learned.
pub fn online(
    order: &[&PromptRecord],
    own: &[Arc<[f32]>],
    p: &mut dyn Predictor,
    warm: usize,
) -> Online {
    let (mut means, mut base, mut truth) = (Vec::new(), Vec::new(), Vec::new());
    let (mut within, mut base_within) = (0usize, 0usize);
    let mut seen: Vec<f64> = Vec::new(); // true lengths so far, ascending
    let prior_median = median(&xsched_llm_core::predict::prior());
    let close = |a: f64, b: f64| usize::from(a <= 2.0 * b && b <= 2.0 * a);
    for (k, (r, e)) in order.iter().zip(own).enumerate() {
        let t = f64::from(r.output_tokens);
        if k >= warm {
            // The warm split is learned, never scored.
            let d = p.predict(&features(r, e));
            within += close(median(&d), t);
            let g = xsched_report::quantile_sorted(&seen, 0.5).unwrap_or(prior_median);
            base_within += close(g, t);
            means.push(d.mean());
            base.push(g);
            truth.push(t);
        }
        // Kept sorted, so the median so far is read, not sorted again.
        let at = seen.partition_point(|x| *x < t);
        seen.insert(at, t);
        p.learn(features(r, e), r.output_tokens);
    }
    let n = truth.len().max(1) as f64;
    Online {
        requests: truth.len(),
        within_2x: within as f64 / n,
        spearman: spearman(&means, &truth),
        baseline_within_2x: base_within as f64 / n,
        baseline_spearman: spearman(&base, &truth),
    }
}

/// What `r`, embedded as `e`, is predicted from.
fn features(r: &PromptRecord, e: &Arc<[f32]>) -> Features {
    Features {
        embedding: e.clone(),
        prompt: r.prompt.as_str().into(),
        previous_answer_tokens: r.previous_answer_tokens,
    }
}

/// Predictor quality and cost.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictEval {
    /// How well the requests were predicted by the history predictor.
    pub online: Online,
    /// How well the same requests, in the same order, were predicted by the length model
    /// (`:predict=model`).
    pub model: Online,
    /// History entries when latency was measured.
    pub history: usize,
    /// History lookup latency P50 (µs), the prompt already embedded.
    pub latency_p50_us: f64,
    /// History lookup latency P99 (µs), the prompt already embedded.
    pub latency_p99_us: f64,
    /// Of the neighbours found with the full history, the fraction as similar as an exact
    /// scan's (1 where the history is scanned exactly).
    pub recall: f64,
    /// The length model's prediction latency P99 (µs), taught every record first.
    pub model_p99_us: f64,
    /// Embedding latency P50 (µs) of the embedder used.
    pub embed_p50_us: f64,
    /// One admission decision under `sagesched` with 10 000 requests waiting (µs, median).
    pub decision_10k_us: f64,
}

/// Median time (µs) of one admission decision under `sagesched` with `n` requests waiting
/// (a slot frees, the scheduler admits the queue's head), their predictions from a history of
/// `pool`'s lengths (500 of them cycled to reach `n`; each request distinct by id).
pub fn decision_latency(pool: &[PromptRecord], n: usize) -> f64 {
    // One engine of one slot: the first arrival is admitted, the rest wait.
    let engine = EngineConfig::default_preset();
    let Ok(mut s) = RequestScheduler::new(Config {
        policy: RequestPolicySpec::row("sagesched").unwrap_or(RequestPolicySpec::FCFS),
        engines: vec![EngineLimits {
            concurrency: 1,
            ..engine.limits()
        }],
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting: usize::MAX,
        service: ServiceModel::Fit(engine.fit()),
        can_pause: false,
        knows_truth: true,
        fairness: xsched_llm_core::Fairness::default(),
        learn_concurrency: false,
        engine_order: None,
    }) else {
        return 0.0;
    };
    let mut history = History::new(10_000);
    let features = |r: &PromptRecord| Features {
        embedding: Hashed.embed(&r.prompt),
        prompt: r.prompt.as_str().into(),
        previous_answer_tokens: r.previous_answer_tokens,
    };
    for r in pool.iter().take(10_000) {
        history.learn(features(r), r.output_tokens);
    }
    // The decision is measured, not the lookups: 500 distinct predictions, cycled.
    let predicted: Vec<(u32, SizeDistribution)> = pool
        .iter()
        .take(500)
        .map(|r| (r.input_tokens, history.predict(&features(r))))
        .collect();
    for id in 0..=n {
        let Some((input, lengths)) = predicted.get(id % predicted.len().max(1)) else {
            return 0.0;
        };
        let arrival = Arrival {
            id: id as u64,
            input_tokens: *input,
            max_tokens: None,
            priority: 0,
            tenant: 0,
            lengths: Some(lengths.clone()),
            ..Default::default()
        };
        let _ = s.handle(0.0, Input::Arrived(arrival));
    }
    while s.poll_decision().is_some() {}
    let times: Vec<f64> = (0..200u64)
        .map(|k| {
            let t = Instant::now();
            let _ = s.handle(1.0, Input::Done { id: k });
            std::hint::black_box(s.poll_decision());
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

/// P99 time (µs) of a length-model prediction for the first 500 of `order`, the model taught
/// every one of them first (its cost is the prompt's words, not what it learned).
fn model_latency_p99(order: &[&PromptRecord]) -> f64 {
    let mut model = LengthModel::new();
    for r in order {
        model.remember(&r.prompt, r.output_tokens);
    }
    let times: Vec<f64> = (order.iter().take(500))
        .map(|r| {
            let t = Instant::now();
            std::hint::black_box(model.lookup(&r.prompt, r.previous_answer_tokens));
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    quantile(&times, 0.99).unwrap_or(0.0)
}

/// A predicted distribution's median, by `xsched-report`'s nearest rank.
fn median(d: &xsched_llm_core::SizeDistribution) -> f64 {
    xsched_report::weighted_quantile(d.atoms(), 0.5).unwrap_or_else(|| d.max())
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
    let own: Vec<Arc<[f32]>> = order.iter().map(|r| embedder.embed(&r.prompt)).collect();
    let online = online(&order, &own, &mut History::new(history), warm);
    let model = self::online(&order, &own, &mut LengthModel::new(), warm);
    let mut full = History::new(history);
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
        full.remember(
            e.clone(),
            latency_pool.get(i).map_or(1, |r| r.output_tokens),
        );
    }
    let lat: Vec<f64> = queries
        .iter()
        .map(|e| {
            let t = Instant::now();
            let d = full.lookup(e, None);
            std::hint::black_box(d);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let at = |q: f64| quantile(&lat, q).unwrap_or(0.0);
    let recall = full.recall(&queries.iter().take(50).cloned().collect::<Vec<_>>());
    PredictEval {
        online,
        model,
        history: full.len(),
        latency_p50_us: at(0.5),
        latency_p99_us: at(0.99),
        recall,
        model_p99_us: model_latency_p99(&order),
        decision_10k_us: decision_latency(latency_pool, 10_000),
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

    /// A mixed set as a gateway's first hundred answers: six kinds of prompt, each with its own
    /// answer length (± 30 %), in a seeded random order.
    fn mixed(n: usize) -> Vec<PromptRecord> {
        use rand::{Rng, SeedableRng};
        const KINDS: [(&str, u32); 6] = [
            ("translate the word {} into French", 4),
            ("is {} a prime number? answer yes or no", 8),
            ("give me a one line summary of {}", 30),
            ("explain how {} works in a paragraph", 120),
            ("write a short story about {} with a twist", 300),
            (
                "write a detailed essay about {} with sections and references",
                600,
            ),
        ];
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(29);
        (0..n)
            .map(|i| {
                let (text, tokens) = KINDS[rng.random_range(0..KINDS.len())];
                let spread = rng.random_range(0.7..1.3);
                PromptRecord {
                    prompt_id: i.to_string(),
                    model: "m".into(),
                    prompt: text.replace("{}", &format!("subject {}", rng.random_range(0..50))),
                    input_tokens: 20,
                    output_tokens: (f64::from(tokens) * spread).round() as u32,
                    previous_answer_tokens: None,
                    conversation: None,
                }
            })
            .collect()
    }

    #[test]
    fn from_its_first_answers_the_predictor_ranks_short_before_long() {
        let records = mixed(100);
        let order: Vec<&PromptRecord> = records.iter().collect();
        let own: Vec<Arc<[f32]>> = order.iter().map(|r| Hashed.embed(&r.prompt)).collect();
        let cold = online(&order, &own, &mut History::new(10_000), 0);
        assert_eq!(cold.requests, 100);
        eprintln!("the first 100 answers: {cold:?}");
        assert!(cold.spearman >= 0.8, "over the first 100 answers: {cold:?}");
        assert!(
            cold.baseline_spearman < 0.3,
            "the global median so far cannot rank: {cold:?}"
        );
        assert!(cold.within_2x > 2.0 * cold.baseline_within_2x, "{cold:?}");
        // The first forty alone (the flat case): already separated.
        let first = online(&order[..40], &own[..40], &mut History::new(10_000), 0);
        assert!(first.spearman >= 0.7, "over the first 40: {first:?}");
    }

    #[test]
    fn from_its_first_answers_the_length_model_ranks_short_before_long() {
        let records = mixed(200);
        let order: Vec<&PromptRecord> = records.iter().collect();
        let own: Vec<Arc<[f32]>> = order.iter().map(|r| Hashed.embed(&r.prompt)).collect();
        let model = online(&order, &own, &mut LengthModel::new(), 0);
        eprintln!("the length model over the first 200 answers: {model:?}");
        assert!(model.spearman >= 0.8, "{model:?}");
        let later = online(&order, &own, &mut LengthModel::new(), 100);
        assert!(later.spearman >= 0.9, "after 100 answers: {later:?}");
    }
}
