//! A hold-down for any policy (`hpf:hold=MS`): a queue that had work counts as ready for `MS`
//! more after it went idle, so the queues it suspended stay suspended through the short gaps
//! between its commands.
//!
//! Why: where the device is the host CPU (POCL's CPU device), a foreground's latency is not only
//! its commands' device time. Between two of its kernels its own host code runs (Python, in a
//! framework), and at that moment its queue is idle: plain fixed priority resumes the background,
//! whose device threads (demoted while it was suspended at Level 2) then take the CPU the
//! foreground's host code needs. Keeping the background suspended until the foreground has been
//! idle for a while closes those gaps, at the background's expense while the foreground is busy.
//! A hold never lets a queue run that the policy would suspend, and never touches queues the
//! held one does not outrank: it only delays resumes.

use super::contract::Policy;
use crate::error::CoreError;
use crate::ids::QueueId;
use crate::time::Nanos;
use crate::view::QueueView;

/// The longest hold accepted: longer is a second policy, not a gap filler.
pub const MAX_HOLD: Nanos = Nanos::from_ms(1_000);

/// `inner`, with every queue held ready for `hold` after it went idle.
#[derive(Debug)]
pub struct Held<P> {
    inner: P,
    hold: Nanos,
    /// Per queue seen: whether it was ready at the last decision, and when it was last seen
    /// going idle.
    seen: Vec<(QueueId, bool, Option<Nanos>)>,
    /// The views the inner policy decides on (held queues marked ready).
    views: Vec<QueueView>,
    next: Option<Nanos>,
}

impl<P: Policy> Held<P> {
    /// `inner` with a hold of `hold`; `None` unless `0 < hold <= MAX_HOLD`.
    pub fn new(inner: P, hold: Nanos) -> Option<Held<P>> {
        (hold > Nanos::ZERO && hold <= MAX_HOLD).then(|| Held {
            inner,
            hold,
            seen: Vec::new(),
            views: Vec::new(),
            next: None,
        })
    }

    /// Note each queue's readiness at `now`; the time the earliest hold ends, if any.
    fn track(&mut self, now: Nanos, queues: &[QueueView]) -> Option<Nanos> {
        self.seen
            .retain(|(id, _, _)| queues.iter().any(|q| q.id == *id));
        self.views.clear();
        let mut next: Option<Nanos> = None;
        for q in queues {
            let slot = match self.seen.iter().position(|(id, _, _)| *id == q.id) {
                Some(slot) => slot,
                None => {
                    self.seen.push((q.id, false, None));
                    self.seen.len() - 1
                }
            };
            let (_, was_ready, idle_at) = &mut self.seen[slot];
            if *was_ready && !q.ready {
                *idle_at = Some(now);
            }
            *was_ready = q.ready;
            let until = idle_at.map(|at| at + self.hold).filter(|&end| end > now);
            let mut view = *q;
            if !q.ready
                && let Some(end) = until
            {
                view.ready = true;
                next = Some(next.map_or(end, |n| n.min(end)));
            }
            self.views.push(view);
        }
        next
    }
}

impl<P: Policy> Policy for Held<P> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        let held_until = self.track(now, queues);
        self.inner.schedule(now, &self.views, run);
        self.next = match (held_until, self.inner.next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next
    }

    fn protectable(&mut self, queues: &[QueueView], protect: &mut [bool]) {
        self.inner.protectable(queues, protect);
    }

    fn check(&self, queues: &[QueueView]) -> Result<(), CoreError> {
        self.inner.check(queues)
    }
}

#[cfg(test)]
mod tests {
    use super::super::hpf::Hpf;
    use super::super::test_util::{decide, view};
    use super::*;

    const HOLD: Nanos = Nanos::from_ms(3);

    fn held() -> Held<Hpf> {
        Held::new(Hpf::default(), HOLD).expect("hold")
    }

    #[test]
    fn the_background_stays_suspended_for_the_hold_after_the_foreground_went_idle() {
        let mut p = held();
        let (fg, bg) = (|r| view(1, 0, 10, r), |r| view(2, 0, 0, r));
        let t0 = Nanos::from_ms(100);
        assert_eq!(decide(&mut p, t0, &[fg(true), bg(true)]), [true, false]);
        let idle = t0 + Nanos::from_ms(1);
        assert_eq!(decide(&mut p, idle, &[fg(false), bg(true)]), [true, false]);
        assert_eq!(
            p.next_timer(),
            Some(idle + HOLD),
            "a decision when the hold ends"
        );
        let almost = idle + HOLD - Nanos(1);
        assert_eq!(
            decide(&mut p, almost, &[fg(false), bg(true)]),
            [true, false]
        );
        assert_eq!(
            decide(&mut p, idle + HOLD, &[fg(false), bg(true)]),
            [true, true]
        );
        assert_eq!(p.next_timer(), None);
    }

    #[test]
    fn work_again_within_the_hold_restarts_it_from_the_next_idle() {
        let mut p = held();
        let (fg, bg) = (|r| view(1, 0, 10, r), |r| view(2, 0, 0, r));
        decide(&mut p, Nanos::ZERO, &[fg(true), bg(true)]);
        decide(&mut p, Nanos::from_ms(1), &[fg(false), bg(true)]);
        decide(&mut p, Nanos::from_ms(2), &[fg(true), bg(true)]);
        let idle = Nanos::from_ms(10);
        decide(&mut p, idle, &[fg(false), bg(true)]);
        assert_eq!(
            decide(&mut p, Nanos::from_ms(12), &[fg(false), bg(true)]),
            [true, false],
            "held from the last idle, not the first"
        );
        assert_eq!(p.next_timer(), Some(idle + HOLD));
    }

    #[test]
    fn a_queue_never_ready_holds_nothing_and_other_devices_are_untouched() {
        let mut p = held();
        let fg_elsewhere = view(1, 1, 10, false);
        assert_eq!(
            decide(&mut p, Nanos::ZERO, &[fg_elsewhere, view(2, 0, 0, true)]),
            [true, true]
        );
        decide(
            &mut p,
            Nanos::from_ms(1),
            &[view(1, 1, 10, true), view(2, 0, 0, true)],
        );
        assert_eq!(
            decide(
                &mut p,
                Nanos::from_ms(2),
                &[fg_elsewhere, view(2, 0, 0, true)]
            ),
            [true, true],
            "fixed priority per device: a hold on device 1 leaves device 0 alone"
        );
    }

    #[test]
    fn zero_or_too_long_a_hold_is_refused() {
        assert!(Held::new(Hpf::default(), Nanos::ZERO).is_none());
        assert!(Held::new(Hpf::default(), MAX_HOLD + Nanos(1)).is_none());
        assert!(Held::new(Hpf::default(), MAX_HOLD).is_some());
    }
}
