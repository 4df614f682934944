//! What the collector learns from: recent durations of one kind (an idle gap at one position of
//! a request, the time between arrivals, a request's standalone length) and conservative
//! predictions from them.

use crate::time::Nanos;
use std::collections::VecDeque;

/// Durations remembered per kind.
const HISTORY: usize = 64;

/// The most recent [`HISTORY`] durations of one kind, kept in arrival order and sorted, so a
/// prediction costs no allocation and no sort.
#[derive(Debug, Clone, Default)]
pub struct GapLearner {
    recent: VecDeque<Nanos>,
    sorted: Vec<Nanos>,
}

impl GapLearner {
    /// A duration of `len` was observed.
    pub fn observe(&mut self, len: Nanos) {
        if self.recent.len() == HISTORY
            && let Some(old) = self.recent.pop_front()
            && let Ok(i) = self.sorted.binary_search(&old)
        {
            self.sorted.remove(i);
        }
        self.recent.push_back(len);
        let at = self.sorted.partition_point(|&x| x <= len);
        self.sorted.insert(at, len);
    }

    /// The 10th percentile of recent durations (nine in ten were at least this long), or zero
    /// before anything was seen: never guess a window that was not observed.
    pub fn predict(&self) -> Nanos {
        self.percentile(10).unwrap_or(Nanos::ZERO)
    }

    /// The 90th percentile of recent durations (how long one may last), `None` before anything
    /// was seen.
    pub fn high(&self) -> Option<Nanos> {
        self.percentile(90)
    }

    /// The mean of recent durations, `None` before anything was seen.
    pub fn mean(&self) -> Option<Nanos> {
        let n = self.recent.len() as u64;
        (n > 0).then(|| Nanos(self.recent.iter().map(|w| w.0).sum::<u64>() / n))
    }

    /// The variance of recent durations (ns²), `None` before anything was seen.
    pub fn variance(&self) -> Option<f64> {
        let mean = self.mean()?.0 as f64;
        let n = self.recent.len() as f64;
        Some(
            self.recent
                .iter()
                .map(|w| (w.0 as f64 - mean).powi(2))
                .sum::<f64>()
                / n,
        )
    }

    /// The remembered durations, shortest first.
    pub fn sorted(&self) -> &[Nanos] {
        &self.sorted
    }

    /// The order statistic at `pct` percent: the `⌊n·pct/100⌋`-th smallest (0-based). A
    /// predictor's parameter, not a reported quantile (those follow `xsched-report`).
    fn percentile(&self, pct: usize) -> Option<Nanos> {
        self.sorted.get(self.sorted.len() * pct / 100).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_learner_predicts_a_low_percentile() {
        let mut l = GapLearner::default();
        assert_eq!(l.predict(), Nanos::ZERO);
        assert_eq!(l.high(), None);
        for us in 1..=100 {
            l.observe(Nanos::from_us(us));
        }
        // The last 64 windows are 37..=100 us: 10th and 90th percentiles 43 and 94 us.
        assert_eq!(l.predict(), Nanos::from_us(43));
        assert_eq!(l.high(), Some(Nanos::from_us(94)));
        assert_eq!(l.mean(), Some(Nanos(68_500)));
        assert_eq!(l.sorted().len(), 64);
        assert!(l.sorted().windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn forgetting_keeps_the_sorted_copy_in_step() {
        let mut l = GapLearner::default();
        for i in 0..500u64 {
            l.observe(Nanos((i * 7919) % 1000));
        }
        let mut expect: Vec<Nanos> = l.recent.iter().copied().collect();
        expect.sort_unstable();
        assert_eq!(l.sorted(), expect.as_slice());
    }
}
