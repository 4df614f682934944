//! What one XQueue's commands went through, for the operator: the accounting an adoption starts
//! from (issue 19; ../shared/docs/PAPERS.md §1, "What the editorial asks for": measure queue
//! waits, misses and command lengths before changing anything), kept in every mode, observe
//! included, and the recent P99 `xsched top` shows.
//!
//! The [`Ledger`] lives under the queue's machine lock, which every event it counts already
//! holds (submit, launch, observed completion, suspend, resume), so it needs no atomics of its
//! own: per command it pushes and pops two timestamps and bumps a few counters. Device time is
//! *measured* where the backend reports it ([`Completion::report_device_time`]; the CPU device
//! does, by timing each tile) and otherwise *estimated* from launch and completion times: the
//! span a command occupied the hardware queue, which on a shared device includes the time it
//! waited behind other queues' work ([`QueueAccount::device_time_measured`] says which).
//!
//! [`Completion::report_device_time`]: crate::Completion::report_device_time

use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::time::Duration;
use xsched_core::{CommandId, Nanos};

/// How long a "recent" P99 covers.
const PERIOD: Nanos = Nanos::from_ms(1000);

/// One queue's accounting since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueAccount {
    /// Commands submitted.
    pub submitted: u64,
    /// Commands handed to the hardware.
    pub launched: u64,
    /// Commands observed complete (failed ones included).
    pub completed: u64,
    /// Commands cancelled before launch.
    pub cancelled: u64,
    /// Total submit-to-observed-completion time of the completed commands; what of it is not
    /// device time was waiting (in xsched's queue or the hardware's).
    pub latency: Duration,
    /// Device time of the completed commands.
    pub device_time: Duration,
    /// Whether `device_time` was measured by the backend (`false`: estimated from launch and
    /// completion times; see the module docs).
    pub device_time_measured: bool,
    /// Total time commands waited between submission and launch.
    pub queue_wait: Duration,
    /// The longest such wait.
    pub queue_wait_max: Duration,
    /// The most commands in flight at once.
    pub max_in_flight: u64,
    /// Completed commands whose submit-to-completion latency exceeded the queue's SLO hint
    /// (or, without one, its deadline hint); 0 without either.
    pub latency_misses: u64,
    /// Suspensions that held work (pending or in flight): preemptions.
    pub preemptions: u64,
    /// Time spent suspended with work held.
    pub suspended: Duration,
    /// Time the preemptions' hardware actions took on the preempting thread (deactivate or
    /// interrupt, reactivate or restore; 0 at Level 1, where a suspend only stops launching).
    pub preemption_cost: Duration,
    /// Level-3 interrupts that stopped commands in flight (their progress is kept on backends
    /// that checkpoint, as the CPU device does; lost on one that restarts them).
    pub interrupts: u64,
}

/// The accounting of one queue and the times it needs, updated under the machine lock.
pub(crate) struct Ledger {
    /// Submission times of the commands not yet observed complete; the first is command
    /// `first`.
    submitted: VecDeque<Nanos>,
    /// Launch times of the commands launched and not yet observed complete.
    launched: VecDeque<Nanos>,
    first: u64,
    /// The latest completion time observed (for the device-time estimate).
    last_completion: Nanos,
    /// The latency above which a command counts as a miss.
    latency_bound: Option<Nanos>,
    /// Since when the queue has been suspended holding work.
    held_since: Option<Nanos>,
    recent: Option<Histogram<u64>>,
    recent_since: Nanos,
    account: QueueAccount,
}

impl Ledger {
    pub(crate) fn new(now: Nanos) -> Ledger {
        Ledger {
            submitted: VecDeque::new(),
            launched: VecDeque::new(),
            first: 0,
            last_completion: Nanos::ZERO,
            latency_bound: None,
            held_since: None,
            // Three significant digits over 1 ns .. 1 h; `None` only if the bounds were invalid.
            recent: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).ok(),
            recent_since: now,
            account: QueueAccount::default(),
        }
    }

    /// Commands completing later than `bound` after submission count as misses.
    pub(crate) fn set_latency_bound(&mut self, bound: Option<Nanos>) {
        self.latency_bound = bound;
    }

    pub(crate) fn submitted(&mut self, now: Nanos) {
        self.submitted.push_back(now);
        self.account.submitted += 1;
    }

    /// Command `cmd` was launched at `now`, with `in_flight` commands in flight after it.
    pub(crate) fn launched(&mut self, cmd: CommandId, now: Nanos, in_flight: usize) {
        let index = usize::try_from(cmd.0.saturating_sub(self.first)).unwrap_or(usize::MAX);
        if let Some(&at) = self.submitted.get(index) {
            let wait = duration(now.saturating_sub(at));
            self.account.queue_wait += wait;
            self.account.queue_wait_max = self.account.queue_wait_max.max(wait);
        }
        self.launched.push_back(now);
        self.account.launched += 1;
        self.account.max_in_flight = self.account.max_in_flight.max(in_flight as u64);
    }

    /// The last `n` submissions were cancelled.
    pub(crate) fn cancelled(&mut self, n: usize) {
        let keep = self.submitted.len().saturating_sub(n);
        self.submitted.truncate(keep);
        self.account.cancelled += n as u64;
    }

    /// `count` more commands were observed complete at `now`; the last of them completed at
    /// `completed_at` if the backend said when. Returns the recent P99 (ns) to publish when a
    /// period ended.
    pub(crate) fn completed(
        &mut self,
        count: u64,
        completed_at: Option<Nanos>,
        now: Nanos,
    ) -> Option<u64> {
        let end = completed_at.unwrap_or(now);
        let mut first_launch = None;
        for _ in 0..count {
            if let Some(t) = self.submitted.pop_front() {
                self.first += 1;
                let latency = now.saturating_sub(t);
                self.account.latency += duration(latency);
                if self.latency_bound.is_some_and(|b| latency > b) {
                    self.account.latency_misses += 1;
                }
                if let Some(h) = self.recent.as_mut() {
                    h.saturating_record(latency.0.max(1));
                }
            }
            let launched = self.launched.pop_front();
            first_launch = first_launch.or(launched);
        }
        self.account.completed += count;
        if let Some(start) = first_launch {
            let from = start.max(self.last_completion);
            self.account.device_time += duration(end.saturating_sub(from));
        }
        self.last_completion = self.last_completion.max(end);
        self.recent_p99(now)
    }

    fn recent_p99(&mut self, now: Nanos) -> Option<u64> {
        let hist = self.recent.as_mut()?;
        if now.saturating_sub(self.recent_since) < PERIOD {
            return None;
        }
        self.recent_since = now;
        let p99 = if hist.is_empty() {
            0
        } else {
            hist.value_at_quantile(0.99)
        };
        hist.reset();
        Some(p99)
    }

    /// The queue was suspended at `now`, holding `held` commands (pending or in flight), of
    /// which `in_flight` in flight; the hardware action took `cost` and was an interrupt if
    /// `interrupt`.
    pub(crate) fn suspended(
        &mut self,
        now: Nanos,
        held: usize,
        in_flight: usize,
        cost: Duration,
        interrupt: bool,
    ) {
        self.account.preemption_cost += cost;
        if held > 0 && self.held_since.is_none() {
            self.held_since = Some(now);
            self.account.preemptions += 1;
        }
        if interrupt && in_flight > 0 {
            self.account.interrupts += 1;
        }
    }

    /// The queue was resumed at `now`; undoing the suspension on the hardware took `cost`.
    pub(crate) fn resumed(&mut self, now: Nanos, cost: Duration) {
        self.account.preemption_cost += cost;
        if let Some(since) = self.held_since.take() {
            self.account.suspended += duration(now.saturating_sub(since));
        }
    }

    /// The accounting so far (a suspension still in force counts up to `now`).
    pub(crate) fn account(&self, now: Nanos) -> QueueAccount {
        let mut a = self.account;
        if let Some(since) = self.held_since {
            a.suspended += duration(now.saturating_sub(since));
        }
        a
    }
}

impl QueueAccount {
    /// Time the completed commands spent waiting: their latency less their device time (in
    /// observe mode, mostly behind other queues' work in the hardware queue: what preemption
    /// can take away at most).
    pub fn waiting(&self) -> Duration {
        self.latency.saturating_sub(self.device_time)
    }
}

fn duration(n: Nanos) -> Duration {
    Duration::from_nanos(n.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_p99_of_a_period_then_reset() {
        let mut l = Ledger::new(Nanos::ZERO);
        for i in 0..100 {
            l.submitted(Nanos::from_us(i));
        }
        l.cancelled(10);
        assert_eq!(
            l.completed(50, None, Nanos::from_ms(10)),
            None,
            "period not over"
        );
        let p99 = l
            .completed(40, None, Nanos::from_ms(1000))
            .expect("period over");
        // Completed at 10 ms: ~10 ms after submission; the last 40 at 1 s.
        assert!(p99 > 900_000_000, "{p99}");
        assert_eq!(
            l.completed(0, None, Nanos::from_ms(2000)),
            Some(0),
            "empty period"
        );
        let a = l.account(Nanos::from_ms(2000));
        assert_eq!((a.submitted, a.cancelled, a.completed), (100, 10, 90));
    }

    #[test]
    fn waits_misses_and_estimated_device_time() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        l.set_latency_bound(Some(us(250)));
        l.submitted(us(0));
        l.submitted(us(0));
        l.launched(CommandId(0), us(10), 1);
        l.launched(CommandId(1), us(50), 2);
        // Both complete; the second at 300 us after being submitted at 0: a miss.
        l.completed(1, Some(us(110)), us(120));
        l.completed(1, Some(us(290)), us(300));
        let a = l.account(us(300));
        assert_eq!(a.queue_wait, Duration::from_micros(60));
        assert_eq!(a.queue_wait_max, Duration::from_micros(50));
        assert_eq!(a.max_in_flight, 2);
        assert_eq!(a.latency_misses, 1, "120 us is within 250, 300 is not");
        assert_eq!(a.latency, Duration::from_micros(420));
        assert_eq!(a.waiting(), Duration::from_micros(140));
        // 10..110 for the first; the second ran from the first's completion: 110..290.
        assert_eq!(a.device_time, Duration::from_micros(280));
    }

    #[test]
    fn preemptions_count_suspensions_that_hold_work() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        l.suspended(us(0), 0, 0, Duration::ZERO, false);
        l.resumed(us(5), Duration::ZERO);
        l.suspended(us(10), 3, 1, Duration::from_micros(2), true);
        l.suspended(us(11), 3, 1, Duration::ZERO, false);
        assert_eq!(
            l.account(us(20)).suspended,
            Duration::from_micros(10),
            "still held"
        );
        l.resumed(us(40), Duration::from_micros(1));
        let a = l.account(us(100));
        assert_eq!(
            a.preemptions, 1,
            "an idle suspension and a repeated one are none"
        );
        assert_eq!(a.suspended, Duration::from_micros(30));
        assert_eq!(a.preemption_cost, Duration::from_micros(3));
        assert_eq!(a.interrupts, 1);
    }
}
