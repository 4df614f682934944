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
    quantile_sorted(&sorted, q)
}

/// [`quantile`] of values already in ascending order: no copy, no sort (for a caller that keeps
/// its values sorted as they come, and asks often).
pub fn quantile_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = ((sorted.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

/// The `q` quantile (0..=1) of `(value, weight)` pairs sorted by value, by the same nearest rank:
/// the first value at which the cumulative weight reaches `q` of the total (a size
/// distribution's median is `weighted_quantile(atoms, 0.5)`); `None` for no pairs. Equal
/// weights give [`quantile`]'s answer: a cumulative weight within rounding of the mark reaches
/// it (weights meant to sum to 1 do so only up to rounding).
pub fn weighted_quantile<T: Copy>(sorted: &[(T, f64)], q: f64) -> Option<T> {
    let total: f64 = sorted.iter().map(|(_, w)| w).sum();
    let reach = total * q.clamp(0.0, 1.0) * (1.0 - 1e-12);
    let mut acc = 0.0;
    for &(v, w) in sorted {
        acc += w;
        if acc >= reach {
            return Some(v);
        }
    }
    sorted.last().map(|&(v, _)| v)
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

    #[test]
    fn weighted_nearest_rank_is_the_unweighted_one_for_equal_weights() {
        // Twelve weights of 1/12 reach half only within rounding: without the tolerance the
        // median would be the seventh.
        for n in [4, 6, 7, 10, 12, 100] {
            let v: Vec<f64> = (1..=n).map(f64::from).collect();
            let equal: Vec<(f64, f64)> = v.iter().map(|&x| (x, 1.0 / f64::from(n))).collect();
            for q in [0.0, 0.1, 0.25, 0.5, 0.51, 0.75, 0.9, 1.0] {
                assert_eq!(
                    weighted_quantile(&equal, q),
                    quantile(&v, q),
                    "n {n}, q {q}"
                );
            }
        }
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            quantile(&v, 0.5),
            Some(2.0),
            "the lower middle of an even count"
        );
        assert_eq!(
            weighted_quantile(&[(1, 0.2), (5, 0.7), (9, 0.1)], 0.5),
            Some(5)
        );
        assert_eq!(weighted_quantile::<f64>(&[], 0.5), None);
    }
}
