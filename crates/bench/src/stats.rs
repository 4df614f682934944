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

/// Median (`xsched-report`'s nearest rank: the lower middle of an even count), min and max of
/// run results (NaN where there are none).
pub(crate) fn spread(v: Vec<f64>) -> (f64, f64, f64) {
    let at = |q| xsched_report::quantile(&v, q).unwrap_or(f64::NAN);
    (at(0.5), at(0.0), at(1.0))
}
