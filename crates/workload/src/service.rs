//! The high-priority (HP) service of the harvesting experiments (Hummingbird): requests made of
//! device kernels separated by CPU work. The simulator runs them in virtual time and
//! `xsched bench harvest` for real, from the same seeded generator.
//!
//! A request arrives, spends `pre` on the CPU (pre-processing), then runs its kernels one after
//! another with a CPU gap between consecutive ones (framework work, sampling, launch
//! overhead), and finishes `post` after its last kernel (post-processing). Every part counts in
//! its latency; only the kernels use the device. Kernel lengths are known to the scheduler (HP
//! kernels are profiled, as Hummingbird does); gaps are only learned from history
//! (`xsched_core::harvest`).

use crate::rng::SeededRng;
use xsched_core::Nanos;

/// An inclusive range of durations, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DurationRange {
    /// Shortest.
    pub lo: Nanos,
    /// Longest.
    pub hi: Nanos,
}

impl DurationRange {
    /// From microseconds.
    pub fn us(lo: u64, hi: u64) -> DurationRange {
        DurationRange {
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
    pub kernel: DurationRange,
    /// CPU gap between consecutive kernels of a request.
    pub gap: DurationRange,
    /// CPU work before the first kernel.
    pub pre: DurationRange,
    /// CPU work after the last kernel.
    pub post: DurationRange,
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
        let mut rng = SeededRng::new(seed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_gives_the_asked_device_share() {
        let shape = HpShape {
            kernels: 4,
            kernel: DurationRange::us(100, 300),
            gap: DurationRange::us(10, 10),
            pre: DurationRange::us(0, 0),
            post: DurationRange::us(0, 0),
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
}
