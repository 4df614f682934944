//! Seeded randomness. One generator per run, seeded from the scenario or the benchmark's
//! parameters, so the same seed gives the same bytes of output.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use xsched_core::Nanos;

/// A seeded generator: one per run, so the same seed gives the same bytes of output.
#[derive(Debug, Clone)]
pub struct SeededRng(Pcg64Mcg);

impl SeededRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SeededRng {
        SeededRng(Pcg64Mcg::seed_from_u64(seed))
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// Uniform in `[lo, hi]`.
    pub fn between(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        if hi <= lo {
            return lo;
        }
        Nanos(self.0.random_range(lo.0..=hi.0))
    }

    /// Exponentially distributed with the given mean (Poisson inter-arrival times).
    pub fn exponential(&mut self, mean: Nanos) -> Nanos {
        let u = self.unit();
        Nanos::from_us_f64(-(1.0 - u).ln() * mean.as_us_f64())
    }
}
