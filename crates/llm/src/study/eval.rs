//! `xsched llm predict-eval`: the output-length predictor's online accuracy against the
//! global median's and the length model's (`:predict=model`), its latency with a full history, and one admission decision's cost.

use super::contract::{Dataset, Study};
use crate::LlmError;
use crate::data::{self, PromptRecord, TOKENS_PER_WORD};
use serde_json::json;
use xsched_llm_sim::engine::EngineConfig;
use xsched_report::{Check, Report, Verdict, columns, round3};

/// `xsched llm predict-eval`: the predictor's online accuracy on the chosen model's responses
/// (or ShareGPT's turns; `requests` of them, a seeded sample), and its latency with a full
/// history of `history` entries.
pub fn predict_eval(s: &Study) -> Result<Report, LlmError> {
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
            "model_within_2x",
            "model_spearman",
            "model_p99_us",
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
fn eval_records(s: &Study) -> Result<(Vec<PromptRecord>, Vec<PromptRecord>, String), LlmError> {
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
        ("model_within_2x", json!(round3(e.model.within_2x))),
        ("model_spearman", json!(round3(e.model.spearman))),
        ("model_p99_us", json!(e.model_p99_us.round())),
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
            name: "the length model's prediction latency P99".into(),
            target: "< 500 us (SageSched)".into(),
            measured: format!("{:.0} us", e.model_p99_us),
            verdict: Verdict::of(e.model_p99_us < 500.0),
        },
        Check {
            name: "one admission decision with 10 k waiting requests".into(),
            target: "<= 1000 us".into(),
            measured: format!("{:.1} us", e.decision_10k_us),
            verdict: Verdict::of(e.decision_10k_us <= 1000.0),
        },
    ]
}
