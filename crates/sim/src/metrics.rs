//! Latency histograms and throughput counters of one workload.

use hdrhistogram::Histogram;
use xsched_core::Nanos;

/// What one workload measured.
#[derive(Debug, Clone)]
pub struct WorkloadMetrics {
    /// Request latencies in nanoseconds (open loop: scheduled arrival to observed completion).
    pub latency: Histogram<u64>,
    /// Requests completed inside the measurement window.
    pub completed: u64,
    /// Requests still unfinished at the end (their age is recorded as a latency lower bound).
    pub unfinished: u64,
    /// Requests that finished within the workload's deadline (when it has one).
    pub on_time: u64,
    /// Standalone execution time of the commands completed inside the window.
    pub work_done: Nanos,
}

impl Default for WorkloadMetrics {
    fn default() -> Self {
        WorkloadMetrics {
            latency: new_histogram(),
            completed: 0,
            unfinished: 0,
            on_time: 0,
            work_done: Nanos::ZERO,
        }
    }
}

/// A histogram for nanosecond values up to an hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid")
}

impl WorkloadMetrics {
    /// Record one latency.
    pub fn record(&mut self, latency: Nanos) {
        self.latency.saturating_record(latency.0.max(1));
    }

    /// The `q` quantile (0..=1) in microseconds; 0 when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.latency.is_empty() {
            0.0
        } else {
            self.latency.value_at_quantile(q) as f64 / 1_000.0
        }
    }

    /// Mean latency in microseconds.
    pub fn mean_us(&self) -> f64 {
        self.latency.mean() / 1_000.0
    }
}
