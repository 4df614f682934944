//! The gateway's Prometheus metrics at `GET /metrics` on its own listener: per policy, how long
//! requests waited in its queue, their time to first byte of the answer's body (the first token
//! of a stream) and to its end, as histograms, and the answers by status. Every figure is
//! measured at the gateway, from a request's arrival; recording is a few atomic additions.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Histogram bucket bounds (seconds).
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// A histogram of durations.
#[derive(Default)]
struct Histogram {
    /// Observations at most each bound (cumulative when rendered).
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    fn record(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| s <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, c) in BUCKETS.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// What the gateway measured.
#[derive(Default)]
pub struct Metrics {
    queue_wait: Histogram,
    ttft: Histogram,
    ttlt: Histogram,
    /// Answers by class: 2xx, 4xx, 429, 5xx (the gateway's or the engine's).
    answers: [AtomicU64; 4],
}

impl Metrics {
    /// A request waited `d` in the queue before it was admitted.
    pub fn queued(&self, d: Duration) {
        self.queue_wait.record(d);
    }

    /// The first byte of an answer's body came `d` after its request arrived.
    pub fn first_byte(&self, d: Duration) {
        self.ttft.record(d);
    }

    /// An answer's body ended (or its client went away) `d` after its request arrived.
    pub fn last_byte(&self, d: Duration) {
        self.ttlt.record(d);
    }

    /// An answer with `status` was given.
    pub fn answered(&self, status: u16) {
        let class = match status {
            200..=299 => 0,
            429 => 2,
            400..=499 => 1,
            _ => 3,
        };
        self.answers[class].fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition, labelled with `policy`.
    pub fn render(&self, policy: &str) -> String {
        let labels = format!("policy=\"{policy}\"");
        let mut out = String::new();
        self.queue_wait.render(
            &mut out,
            "xsched_gateway_queue_wait_seconds",
            "time requests waited in the gateway's queue",
            &labels,
        );
        self.ttft.render(
            &mut out,
            "xsched_gateway_ttft_seconds",
            "arrival to the first byte of the answer's body (a stream's first token)",
            &labels,
        );
        self.ttlt.render(
            &mut out,
            "xsched_gateway_ttlt_seconds",
            "arrival to the end of the answer's body",
            &labels,
        );
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_answers_total Answers given, by status class.\n# TYPE xsched_gateway_answers_total counter"
        );
        for (class, n) in ["2xx", "4xx", "429", "5xx"].iter().zip(&self.answers) {
            let _ = writeln!(
                out,
                "xsched_gateway_answers_total{{{labels},status=\"{class}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let m = Metrics::default();
        m.last_byte(Duration::from_millis(3));
        m.last_byte(Duration::from_millis(700));
        m.last_byte(Duration::from_secs(500));
        m.answered(200);
        m.answered(429);
        let text = m.render("fcfs");
        assert!(
            text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"1\"} 2"),
            "{text}"
        );
        assert!(text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"+Inf\"} 3"));
        assert!(text.contains("xsched_gateway_ttlt_seconds_count{policy=\"fcfs\"} 3"));
        assert!(text.contains("xsched_gateway_answers_total{policy=\"fcfs\",status=\"429\"} 1"));
    }
}
