//! Latency histograms and throughput counters of one workload.

use hdrhistogram::Histogram;
use xsched_core::Nanos;
use xsched_report::{hist_quantile_us, new_histogram};

/// What one workload measured.
#[derive(Debug, Clone)]
pub struct WorkloadMetrics {
    /// Request latencies in nanoseconds (open loop: scheduled arrival to observed completion).
    pub latency: Histogram<u64>,
    /// Requests completed inside the measurement window.
    pub completed: u64,
    /// Requests still unfinished at the end (their age is recorded as a latency lower bound).
    pub unfinished: u64,
    /// Of those, the ones whose deadline had passed by the end (late for certain; the others
    /// might still have made it).
    pub unfinished_late: u64,
    /// Requests that finished within the workload's deadline (when it has one).
    pub on_time: u64,
    /// Standalone execution time of the commands completed inside the window.
    pub work_done: Nanos,
    /// Time between consecutive completions inside the window, in nanoseconds (a video
    /// stream's frame interval).
    pub interval: Histogram<u64>,
    /// The latest completion inside the window.
    pub last_done: Option<Nanos>,
}

impl Default for WorkloadMetrics {
    fn default() -> Self {
        WorkloadMetrics {
            latency: new_histogram(),
            completed: 0,
            unfinished: 0,
            unfinished_late: 0,
            on_time: 0,
            work_done: Nanos::ZERO,
            interval: new_histogram(),
            last_done: None,
        }
    }
}

impl WorkloadMetrics {
    /// Record one latency.
    pub fn record(&mut self, latency: Nanos) {
        self.latency.saturating_record(latency.0.max(1));
    }

    /// One completion at `now`: the interval since the previous one.
    pub fn completed_at(&mut self, now: Nanos) {
        if let Some(prev) = self.last_done {
            self.interval
                .saturating_record(now.saturating_sub(prev).0.max(1));
        }
        self.last_done = Some(now);
    }

    /// The `q` quantile (0..=1) of the completion interval in microseconds; 0 when fewer than
    /// two completions were recorded.
    pub fn interval_quantile_us(&self, q: f64) -> f64 {
        hist_quantile_us(&self.interval, q)
    }

    /// The `q` quantile (0..=1) in microseconds; 0 when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> f64 {
        hist_quantile_us(&self.latency, q)
    }

    /// Mean latency in microseconds.
    pub fn mean_us(&self) -> f64 {
        self.latency.mean() / 1_000.0
    }
}
