//! The high-priority (HP) service whose idle time is harvested: requests made of device
//! kernels separated by CPU work, and the learner that predicts those idle windows.
//!
//! A request arrives, spends `pre` on the CPU (pre-processing), then runs its kernels one after
//! another with a CPU gap between consecutive ones (framework work, sampling, launch
//! overhead), and finishes `post` after its last kernel (post-processing). Every part counts in
//! its latency; only the kernels use the device. Kernel lengths are known to the scheduler (HP
//! kernels are profiled, as Hummingbird does); gaps are only learned from history.

use crate::rng::SimRng;
use std::collections::VecDeque;
use xsched_core::Nanos;

/// An inclusive range of durations, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Shortest.
    pub lo: Nanos,
    /// Longest.
    pub hi: Nanos,
}

impl Span {
    /// From microseconds.
    pub fn us(lo: u64, hi: u64) -> Span {
        Span {
            lo: Nanos::from_us(lo),
            hi: Nanos::from_us(hi),
        }
    }

    fn mean(&self) -> f64 {
        (self.lo.0 as f64 + self.hi.0 as f64) / 2.0
    }
}

/// The shape of the HP service.
#[derive(Debug, Clone, PartialEq)]
pub struct HpShape {
    /// Kernels per request.
    pub kernels: u32,
    /// Each kernel's length.
    pub kernel: Span,
    /// CPU gap between consecutive kernels of a request.
    pub gap: Span,
    /// CPU work before the first kernel.
    pub pre: Span,
    /// CPU work after the last kernel.
    pub post: Span,
    /// Fraction of the device HP kernels use when HP runs alone (sets the arrival rate).
    pub device_share: f64,
    /// Poisson arrivals, or a fixed period (an inference service fed at a steady rate).
    pub poisson: bool,
    /// Requests offered.
    pub requests: u32,
}

/// One HP request.
#[derive(Debug, Clone, PartialEq)]
pub struct HpRequest {
    /// When it arrives.
    pub arrival: Nanos,
    /// Pre-processing before the first kernel.
    pub pre: Nanos,
    /// Kernel lengths, in order.
    pub kernels: Vec<Nanos>,
    /// CPU gap after kernel `i` (before kernel `i + 1`); one fewer than kernels.
    pub gaps: Vec<Nanos>,
    /// Post-processing after the last kernel.
    pub post: Nanos,
}

impl HpShape {
    /// The requests of this shape, arriving (Poisson or periodically) at the rate that makes HP
    /// kernels use `device_share` of the device.
    pub fn generate(&self, seed: u64) -> Vec<HpRequest> {
        let mut rng = SimRng::new(seed);
        let work = self.kernel.mean() * f64::from(self.kernels.max(1));
        let mean_gap = Nanos((work / self.device_share.max(1e-6)) as u64);
        let mut t = Nanos::ZERO;
        (0..self.requests)
            .map(|_| {
                t += if self.poisson {
                    rng.exponential(mean_gap)
                } else {
                    mean_gap
                };
                let kernels: Vec<Nanos> = (0..self.kernels.max(1))
                    .map(|_| rng.between(self.kernel.lo, self.kernel.hi))
                    .collect();
                let gaps = (1..kernels.len())
                    .map(|_| rng.between(self.gap.lo, self.gap.hi))
                    .collect();
                HpRequest {
                    arrival: t,
                    pre: rng.between(self.pre.lo, self.pre.hi),
                    kernels,
                    gaps,
                    post: rng.between(self.post.lo, self.post.hi),
                }
            })
            .collect()
    }
}

/// Recent idle windows of one kind, and a conservative prediction of the next.
#[derive(Debug, Clone, Default)]
pub struct GapLearner {
    recent: VecDeque<Nanos>,
}

/// Windows remembered per kind.
const HISTORY: usize = 64;

impl GapLearner {
    /// A window of `len` was observed.
    pub fn observe(&mut self, len: Nanos) {
        if self.recent.len() == HISTORY {
            self.recent.pop_front();
        }
        self.recent.push_back(len);
    }

    /// The 10th percentile of recent windows (nine in ten were at least this long), or zero
    /// before anything was seen: never guess a window that was not observed.
    pub fn predict(&self) -> Nanos {
        self.percentile(10).unwrap_or(Nanos::ZERO)
    }

    /// The 90th percentile of recent windows (how long one may last), `None` before anything
    /// was seen.
    pub fn high(&self) -> Option<Nanos> {
        self.percentile(90)
    }

    /// The mean of recent windows, `None` before anything was seen.
    pub fn mean(&self) -> Option<Nanos> {
        let n = self.recent.len() as u64;
        (n > 0).then(|| Nanos(self.recent.iter().map(|w| w.0).sum::<u64>() / n))
    }

    /// The variance of recent windows (ns²), `None` before anything was seen.
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

    fn percentile(&self, pct: usize) -> Option<Nanos> {
        let mut v: Vec<Nanos> = self.recent.iter().copied().collect();
        v.sort_unstable();
        v.get(v.len() * pct / 100).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_gives_the_asked_device_share() {
        let shape = HpShape {
            kernels: 4,
            kernel: Span::us(100, 300),
            gap: Span::us(10, 10),
            pre: Span::us(0, 0),
            post: Span::us(0, 0),
            device_share: 0.5,
            poisson: true,
            requests: 20_000,
        };
        let reqs = shape.generate(3);
        let work: u64 = reqs.iter().flat_map(|r| &r.kernels).map(|k| k.0).sum();
        let span = reqs[reqs.len() - 1].arrival.0;
        let share = work as f64 / span as f64;
        assert!((share - 0.5).abs() < 0.02, "{share}");
        assert!(reqs.iter().all(|r| r.gaps.len() == 3));
        assert_eq!(shape.generate(3), reqs, "seeded");
    }

    #[test]
    fn the_learner_predicts_a_low_percentile() {
        let mut l = GapLearner::default();
        assert_eq!(l.predict(), Nanos::ZERO);
        for us in 1..=100 {
            l.observe(Nanos::from_us(us));
        }
        // The last 64 windows are 37..=100 us: 10th and 90th percentiles 43 and 94 us.
        assert_eq!(l.predict(), Nanos::from_us(43));
        assert_eq!(l.high(), Some(Nanos::from_us(94)));
        assert_eq!(l.mean(), Some(Nanos(68_500)));
    }
}
