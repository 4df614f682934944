//! Helpers the experiments share beyond `xsched-report`'s: seeded randomness, microsecond
//! percentiles for tables, `null` cells, the median and spread of repeated runs.

use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde_json::{Value, json};
use xsched_report::{hist_quantile_us, round1};

/// A seeded generator: runs are reproducible in their random choices (not in their timings).
pub(crate) fn rng(seed: u64) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed)
}

/// A percentile of a nanosecond histogram in microseconds, rounded to 0.1 µs.
pub(crate) fn pct_us(h: &Histogram<u64>, q: f64) -> f64 {
    round1(hist_quantile_us(h, q))
}

/// `-` in tables, `null` in JSON.
pub(crate) fn none() -> Value {
    json!(null)
}

/// Median, min and max of run results (NaN where there are none).
pub(crate) fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
    let lo = v.first().copied().unwrap_or(f64::NAN);
    let hi = v.last().copied().unwrap_or(f64::NAN);
    (mid, lo, hi)
}
