//! What one XQueue's commands went through, for the operator: the accounting an adoption starts
//! from (measure queue waits, misses and command lengths before changing anything), kept in every mode, observe
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
    /// Device time of the completed commands (on the CPU device, its workers' time in their
    /// tiles: with several workers, tiles run in parallel add up and can exceed the latency).
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
    /// Submission times of the commands not yet observed complete (nor cancelled), by id in
    /// increasing order (cancelled commands leave gaps in the ids).
    submitted: VecDeque<(u64, Nanos)>,
    /// Launch times of the commands launched and not yet observed complete, in launch order.
    launched: VecDeque<(u64, Nanos)>,
    /// The next id a submission gets.
    next: u64,
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
            next: 0,
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

    /// A command was submitted at `now`; `suspended` says whether the queue is held, so that
    /// work arriving at a queue suspended while idle counts as held from now.
    pub(crate) fn submitted(&mut self, now: Nanos, suspended: bool) {
        self.submitted.push_back((self.next, now));
        self.next += 1;
        self.account.submitted += 1;
        if suspended && self.held_since.is_none() {
            self.held_since = Some(now);
            self.account.preemptions += 1;
        }
    }

    /// Command `cmd` was launched at `now`, with `in_flight` commands in flight after it.
    pub(crate) fn launched(&mut self, cmd: CommandId, now: Nanos, in_flight: usize) {
        if let Ok(i) = self.submitted.binary_search_by_key(&cmd.0, |&(id, _)| id) {
            let wait = duration(now.saturating_sub(self.submitted[i].1));
            self.account.queue_wait += wait;
            self.account.queue_wait_max = self.account.queue_wait_max.max(wait);
        }
        self.launched.push_back((cmd.0, now));
        self.account.launched += 1;
        self.account.max_in_flight = self.account.max_in_flight.max(in_flight as u64);
    }

    /// The last `n` submissions were cancelled (before launch).
    pub(crate) fn cancelled(&mut self, n: usize) {
        let keep = self.submitted.len().saturating_sub(n);
        self.submitted.truncate(keep);
        self.account.cancelled += n as u64;
    }

    /// Every command up to `last` was observed complete at `now`; the last of them completed
    /// at `completed_at` if the backend said when. Returns the recent P99 (ns) to publish when
    /// a period ended.
    pub(crate) fn completed(
        &mut self,
        last: CommandId,
        completed_at: Option<Nanos>,
        now: Nanos,
    ) -> Option<u64> {
        let end = completed_at.unwrap_or(now);
        while let Some(&(id, t)) = self.submitted.front()
            && id <= last.0
        {
            self.submitted.pop_front();
            self.account.completed += 1;
            let latency = now.saturating_sub(t);
            self.account.latency += duration(latency);
            if self.latency_bound.is_some_and(|b| latency > b) {
                self.account.latency_misses += 1;
            }
            if let Some(h) = self.recent.as_mut() {
                h.saturating_record(latency.0.max(1));
            }
        }
        let mut first_launch = None;
        while let Some(&(id, t)) = self.launched.front()
            && id <= last.0
        {
            self.launched.pop_front();
            first_launch = first_launch.or(Some(t));
        }
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
    /// `interrupt`. A suspension that holds nothing is no preemption (until work arrives).
    pub(crate) fn suspended(
        &mut self,
        now: Nanos,
        held: usize,
        in_flight: usize,
        cost: Duration,
        interrupt: bool,
    ) {
        if held == 0 {
            return;
        }
        self.account.preemption_cost += cost;
        if self.held_since.is_none() {
            self.held_since = Some(now);
            self.account.preemptions += 1;
        }
        if interrupt && in_flight > 0 {
            self.account.interrupts += 1;
        }
    }

    /// The queue was resumed at `now`; undoing the suspension on the hardware took `cost`
    /// (counted if the suspension held work).
    pub(crate) fn resumed(&mut self, now: Nanos, cost: Duration) {
        if let Some(since) = self.held_since.take() {
            self.account.preemption_cost += cost;
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

impl From<QueueAccount> for xsched_proto::WireAccount {
    fn from(a: QueueAccount) -> Self {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        xsched_proto::WireAccount {
            submitted: a.submitted,
            launched: a.launched,
            completed: a.completed,
            cancelled: a.cancelled,
            latency_ns: ns(a.latency),
            device_ns: ns(a.device_time),
            device_measured: a.device_time_measured,
            queue_wait_ns: ns(a.queue_wait),
            queue_wait_max_ns: ns(a.queue_wait_max),
            max_in_flight: a.max_in_flight,
            latency_misses: a.latency_misses,
            preemptions: a.preemptions,
            held_ns: ns(a.suspended),
            preemption_cost_ns: ns(a.preemption_cost),
            interrupts: a.interrupts,
        }
    }
}

impl QueueAccount {
    /// What happened since `earlier` (an account of the same queue taken before): counts and
    /// times are differences; the two maxima (`queue_wait_max`, `max_in_flight`) stay the
    /// queue's whole-life maxima, which no difference can recover.
    pub fn since(&self, earlier: &QueueAccount) -> QueueAccount {
        let n = |a: u64, b: u64| a.saturating_sub(b);
        QueueAccount {
            submitted: n(self.submitted, earlier.submitted),
            launched: n(self.launched, earlier.launched),
            completed: n(self.completed, earlier.completed),
            cancelled: n(self.cancelled, earlier.cancelled),
            latency: self.latency.saturating_sub(earlier.latency),
            device_time: self.device_time.saturating_sub(earlier.device_time),
            device_time_measured: self.device_time_measured,
            queue_wait: self.queue_wait.saturating_sub(earlier.queue_wait),
            queue_wait_max: self.queue_wait_max,
            max_in_flight: self.max_in_flight,
            latency_misses: n(self.latency_misses, earlier.latency_misses),
            preemptions: n(self.preemptions, earlier.preemptions),
            suspended: self.suspended.saturating_sub(earlier.suspended),
            preemption_cost: self.preemption_cost.saturating_sub(earlier.preemption_cost),
            interrupts: n(self.interrupts, earlier.interrupts),
        }
    }

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
            l.submitted(Nanos::from_us(i), false);
        }
        l.cancelled(10);
        let upto = |n: u64| CommandId(n - 1);
        let early = l.completed(upto(50), None, Nanos::from_ms(10));
        assert_eq!(early, None, "period not over");
        let p99 = l
            .completed(upto(90), None, Nanos::from_ms(1000))
            .expect("period over");
        // Completed at 10 ms: ~10 ms after submission; the last 40 at 1 s.
        assert!(p99 > 900_000_000, "{p99}");
        let empty = l.completed(upto(90), None, Nanos::from_ms(2000));
        assert_eq!(empty, Some(0), "empty period");
        let a = l.account(Nanos::from_ms(2000));
        assert_eq!((a.submitted, a.cancelled, a.completed), (100, 10, 90));
    }

    #[test]
    fn waits_misses_and_estimated_device_time() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        l.set_latency_bound(Some(us(250)));
        l.submitted(us(0), false);
        l.submitted(us(0), false);
        l.launched(CommandId(0), us(10), 1);
        l.launched(CommandId(1), us(50), 2);
        // Both complete; the second at 300 us after being submitted at 0: a miss.
        l.completed(CommandId(0), Some(us(110)), us(120));
        l.completed(CommandId(1), Some(us(290)), us(300));
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
    fn a_cancel_leaves_a_gap_in_the_ids_and_the_counts_stay_right() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        for i in 0..4 {
            l.submitted(us(i), false);
        }
        l.launched(CommandId(0), us(10), 1);
        // 1..=3 cancelled while 0 is in flight; 4 and 5 submitted and launched after.
        l.cancelled(3);
        l.submitted(us(20), false);
        l.submitted(us(20), false);
        l.launched(CommandId(4), us(30), 2);
        l.launched(CommandId(5), us(40), 3);
        l.completed(CommandId(5), Some(us(90)), us(100));
        let a = l.account(us(100));
        assert_eq!((a.submitted, a.cancelled), (6, 3));
        assert_eq!(
            (a.launched, a.completed),
            (3, 3),
            "completed never exceeds launched"
        );
        // Waits: 0 waited 10 us, 4 and 5 waited 10 and 20 us.
        assert_eq!(a.queue_wait, Duration::from_micros(40));
        assert_eq!(a.queue_wait_max, Duration::from_micros(20));
        // Latencies at 100 us: 100, 80, 80.
        assert_eq!(a.latency, Duration::from_micros(260));
    }

    #[test]
    fn work_arriving_at_a_queue_suspended_while_idle_is_held_from_then() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        l.suspended(us(0), 0, 0, Duration::from_micros(5), false);
        l.submitted(us(10), true);
        l.submitted(us(12), true);
        l.resumed(us(30), Duration::from_micros(1));
        let a = l.account(us(40));
        assert_eq!(a.preemptions, 1);
        assert_eq!(a.suspended, Duration::from_micros(20));
        assert_eq!(
            a.preemption_cost,
            Duration::from_micros(1),
            "an idle suspension's cost is none of a preemption's"
        );
    }

    #[test]
    fn an_account_since_an_earlier_one_is_the_difference() {
        let us = Nanos::from_us;
        let mut l = Ledger::new(Nanos::ZERO);
        l.submitted(us(0), false);
        l.launched(CommandId(0), us(50), 1);
        l.completed(CommandId(0), None, us(60));
        let start = l.account(us(60));
        l.submitted(us(70), false);
        l.launched(CommandId(1), us(75), 1);
        l.completed(CommandId(1), None, us(80));
        let window = l.account(us(80)).since(&start);
        assert_eq!((window.submitted, window.completed), (1, 1));
        assert_eq!(window.queue_wait, Duration::from_micros(5));
        assert_eq!(
            window.queue_wait_max,
            Duration::from_micros(50),
            "whole-life maximum"
        );
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
