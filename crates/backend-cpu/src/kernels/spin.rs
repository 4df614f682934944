//! A calibrated busy loop: real CPU work of a chosen duration, split into checkpointed tiles.

use crate::kernel::Kernel;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Default tile length of [`Spin`]: the Level-3 preemption granularity.
pub const DEFAULT_CHECKPOINT: Duration = Duration::from_micros(50);

/// A dependent multiply-add chain the compiler cannot shorten.
fn spin_iterations(n: u64) -> u64 {
    let mut x = black_box(0x2545_F491_4F6C_DD1Du64);
    for _ in 0..n {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    black_box(x)
}

/// Loop iterations per microsecond on this machine, measured once per process (best of five
/// 2 ms runs, so a preempted run does not inflate later kernels).
pub fn spin_rate() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let mut best = 0.0f64;
        for _ in 0..5 {
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < Duration::from_millis(2) {
                spin_iterations(4096);
                n += 4096;
            }
            let us = start.elapsed().as_secs_f64() * 1e6;
            best = best.max(n as f64 / us);
        }
        best.max(1.0)
    })
}

/// Busy work for a given duration, in tiles of about `checkpoint` each.
#[derive(Debug)]
pub struct Spin {
    tiles: u32,
    iterations_per_tile: u64,
}

impl Spin {
    /// `duration` of work in tiles of [`DEFAULT_CHECKPOINT`].
    pub fn new(duration: Duration) -> Spin {
        Spin::with_checkpoint(duration, DEFAULT_CHECKPOINT)
    }

    /// `duration` of work in tiles of about `checkpoint` (at least one tile).
    pub fn with_checkpoint(duration: Duration, checkpoint: Duration) -> Spin {
        let checkpoint = checkpoint.max(Duration::from_micros(1));
        let tiles = duration
            .as_nanos()
            .div_ceil(checkpoint.as_nanos())
            .clamp(1, u128::from(u32::MAX)) as u32;
        let total = duration.as_secs_f64() * 1e6 * spin_rate();
        Spin {
            tiles,
            iterations_per_tile: (total / f64::from(tiles)).round() as u64,
        }
    }
}

impl Kernel for Spin {
    fn tiles(&self) -> u32 {
        self.tiles
    }

    fn run_tile(&self, _tile: u32) {
        spin_iterations(self.iterations_per_tile);
    }

    fn name(&self) -> &'static str {
        "spin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_duration() {
        let k = Spin::with_checkpoint(Duration::from_micros(1000), Duration::from_micros(300));
        assert_eq!(k.tiles(), 4);
        assert_eq!(Spin::new(Duration::ZERO).tiles(), 1);
        assert!(spin_rate() > 1.0);
    }
}
