//! Small helpers shared by the experiments: histograms, rows, randomness, device set-up.

use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde_json::{Map, Value, json};
use std::time::Duration;

pub(crate) use xsched_sim::metrics::new_histogram;

/// A seeded generator: runs are reproducible in their random choices (not in their timings).
pub(crate) fn rng(seed: u64) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed)
}

pub(crate) fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(ns);
}

/// A percentile in microseconds, rounded to 0.1 µs.
pub(crate) fn pct_us(h: &Histogram<u64>, q: f64) -> f64 {
    round1(h.value_at_quantile(q) as f64 / 1_000.0)
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

/// A row from `(column, value)` pairs.
pub(crate) fn row(cells: &[(&str, Value)]) -> Map<String, Value> {
    cells
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// `-` in tables, `null` in JSON.
pub(crate) fn none() -> Value {
    json!(null)
}

pub(crate) fn columns(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}
