//! Histograms and quantiles: one constructor, one convention (nearest rank; see the crate doc).

use hdrhistogram::Histogram;
use std::time::Duration;

/// A histogram for nanosecond values from 1 ns to an hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid")
}

/// Record a duration in nanoseconds (at least 1; saturating at the histogram's bound).
pub fn record_duration(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(ns);
}

/// The `q` quantile (0..=1) of a nanosecond histogram, in microseconds; 0 when it is empty.
pub fn hist_quantile_us(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1_000.0
    }
}

/// The `q` quantile (0..=1) of `values` by nearest rank: the `⌈q·n⌉`-th smallest (at least the
/// smallest); `None` for no values. Incomparable values (NaN) sort as equal.
pub fn quantile<T: PartialOrd + Copy>(values: &[T], q: f64) -> Option<T> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let rank = ((sorted.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_the_histogram() {
        let v: Vec<u64> = (1..=200).map(|x| x * 1_000).collect();
        let mut h = new_histogram();
        for &x in &v {
            h.saturating_record(x);
        }
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
            let exact = quantile(&v, q).map(|x| x as f64 / 1_000.0);
            let hist = hist_quantile_us(&h, q);
            let e = exact.unwrap_or_default();
            assert!((hist - e).abs() <= e * 1e-3 + 1e-9, "q {q}: {hist} vs {e}");
        }
        assert_eq!(quantile(&v, 0.5), Some(100_000));
        assert_eq!(quantile(&v, 0.99), Some(198_000));
        assert_eq!(quantile::<u64>(&[], 0.5), None);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(hist_quantile_us(&new_histogram(), 0.99), 0.0);
    }
}
