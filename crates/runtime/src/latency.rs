//! Recent command latency of one queue (submit → observed completion), for `xsched top`.
//!
//! The launcher notes each submission's time and, as completions are observed in order, records
//! their latencies; once a period it publishes the P99 and starts over. A push, a pop and a
//! histogram increment per command.

use hdrhistogram::Histogram;
use std::collections::VecDeque;
use xsched_core::Nanos;

/// How long a "recent" P99 covers.
const PERIOD: Nanos = Nanos::from_ms(1000);

pub(crate) struct RecentLatency {
    submitted: VecDeque<Nanos>,
    hist: Option<Histogram<u64>>,
    since: Nanos,
}

impl RecentLatency {
    pub(crate) fn new(now: Nanos) -> RecentLatency {
        RecentLatency {
            submitted: VecDeque::new(),
            // Three significant digits over 1 ns .. 1 h; `None` only if the bounds were invalid.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).ok(),
            since: now,
        }
    }

    pub(crate) fn submitted(&mut self, now: Nanos) {
        self.submitted.push_back(now);
    }

    /// The last `n` submissions were cancelled.
    pub(crate) fn cancelled(&mut self, n: usize) {
        let keep = self.submitted.len().saturating_sub(n);
        self.submitted.truncate(keep);
    }

    /// `count` more commands completed at `now`. Returns the P99 (ns) to publish when a period
    /// ended.
    pub(crate) fn completed(&mut self, count: u64, now: Nanos) -> Option<u64> {
        let hist = self.hist.as_mut()?;
        for _ in 0..count {
            if let Some(t) = self.submitted.pop_front() {
                hist.saturating_record(now.saturating_sub(t).0.max(1));
            }
        }
        if now.saturating_sub(self.since) < PERIOD {
            return None;
        }
        self.since = now;
        let p99 = if hist.is_empty() {
            0
        } else {
            hist.value_at_quantile(0.99)
        };
        hist.reset();
        Some(p99)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_of_a_period_then_reset() {
        let mut r = RecentLatency::new(Nanos::ZERO);
        for i in 0..100 {
            r.submitted(Nanos::from_us(i));
        }
        r.cancelled(10);
        assert_eq!(r.completed(50, Nanos::from_ms(10)), None, "period not over");
        let p99 = r.completed(40, Nanos::from_ms(1000)).expect("period over");
        // Completed at 10 ms: ~10 ms after submission; the last 40 at 1 s.
        assert!(p99 > 900_000_000, "{p99}");
        assert_eq!(
            r.completed(0, Nanos::from_ms(2000)),
            Some(0),
            "empty period"
        );
    }
}
