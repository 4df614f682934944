//! The dispatcher: a [`QueueScheduler`] together with the handle through which each of its queues
//! is reached, so every driver turns decisions into actions the same way.
//!
//! The handle type `C` is the driver's: a closure that suspends a launcher (the in-process
//! scheduler thread), a client connection's outbox (the daemon), a queue index (the simulator).
//! The dispatcher never calls into it by itself: [`Dispatcher::dispatch`] hands each operation
//! with its handle to the caller, who applies it — inline, or after releasing a lock. Like the
//! rest of the core it reads no clock: every call that needs the time takes `now`.
//!
//! Timers are spaced by at least [`MIN_TIMER_GAP`]: whatever a policy asks for (a bug, or a
//! client's hint it failed to bound), a driver that sleeps until [`Dispatcher::next_timer`]
//! never spins.

use crate::error::CoreError;
use crate::hint::QueueHints;
use crate::ids::{DeviceId, QueueId};
use crate::policy::Policy;
use crate::scheduler::{Operation, QueueEvent, QueueScheduler};
use crate::time::Nanos;
use crate::view::QueueView;
use std::collections::HashMap;

/// A queue as the scheduler sees it, with its current decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// What the policy sees.
    pub view: QueueView,
    /// Whether the scheduler has it suspended.
    pub suspended: bool,
}

/// The shortest interval between two timeouts: a policy's timer due sooner after the last
/// one waits until then.
pub const MIN_TIMER_GAP: Nanos = Nanos::from_us(20);

/// A scheduler and the handles of its queues.
pub struct Dispatcher<C> {
    sched: QueueScheduler,
    handles: HashMap<QueueId, C>,
    /// When the last timeout fired.
    last_timeout: Option<Nanos>,
}

impl<C> Dispatcher<C> {
    /// A dispatcher running `policy`.
    pub fn new(policy: Box<dyn Policy>) -> Dispatcher<C> {
        Dispatcher {
            sched: QueueScheduler::new(policy),
            handles: HashMap::new(),
            last_timeout: None,
        }
    }

    /// A new queue at `now`, reached through `handle`.
    pub fn register(
        &mut self,
        now: Nanos,
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        handle: C,
    ) -> Result<(), CoreError> {
        self.sched.handle_event(
            now,
            QueueEvent::Register {
                queue,
                device,
                hints,
            },
        )?;
        self.handles.insert(queue, handle);
        Ok(())
    }

    /// Feed one event observed at `now`. An unregistered queue's handle is dropped.
    pub fn event(&mut self, now: Nanos, event: QueueEvent) -> Result<(), CoreError> {
        if let QueueEvent::Unregister(q) = event {
            self.handles.remove(&q);
        }
        self.sched.handle_event(now, event)
    }

    /// Replace the policy; the next dispatch re-decides every queue. Refused if the policy
    /// cannot work with the registered queues (`Policy::check`).
    pub fn set_policy(&mut self, policy: Box<dyn Policy>) -> Result<(), CoreError> {
        self.sched.set_policy(policy)
    }

    /// The running policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.sched.policy_name()
    }

    /// Decide (if anything changed) and hand every resulting operation, with the handle of its
    /// queue, to `apply`.
    pub fn dispatch(&mut self, mut apply: impl FnMut(&C, Operation)) {
        while let Some(op) = self.sched.poll_operation() {
            if let Some(handle) = self.handles.get(&op.queue()) {
                apply(handle, op);
            }
        }
    }

    /// When the policy next needs [`timeout`](Self::timeout): its own timer, but never sooner
    /// than [`MIN_TIMER_GAP`] after the last timeout.
    pub fn next_timer(&mut self) -> Option<Nanos> {
        let t = self.sched.poll_timeout()?;
        Some(match self.last_timeout {
            Some(last) => t.max(last + MIN_TIMER_GAP),
            None => t,
        })
    }

    /// The clock reached the time [`next_timer`](Self::next_timer) asked for.
    pub fn timeout(&mut self, now: Nanos) {
        self.last_timeout = Some(now);
        self.sched.handle_timeout(now);
    }

    /// Every queue with its current decision (deciding first, if events are pending).
    pub fn snapshot(&mut self, mut apply: impl FnMut(&C, Operation)) -> Vec<QueueSnapshot> {
        self.dispatch(&mut apply);
        self.sched
            .queues()
            .iter()
            .map(|v| QueueSnapshot {
                view: *v,
                suspended: self.sched.is_suspended(v.id) == Some(true),
            })
            .collect()
    }

    /// Resume every suspended queue and lift protections (nobody will schedule them after
    /// this): the operations go to `apply`.
    pub fn release_all(&mut self, mut apply: impl FnMut(&C, Operation)) {
        for q in self.sched.queues() {
            let Some(handle) = self.handles.get(&q.id) else {
                continue;
            };
            if self.sched.is_suspended(q.id) == Some(true) {
                apply(handle, Operation::Resume(q.id));
            }
            if self.sched.is_protected(q.id) == Some(true) {
                apply(handle, Operation::Unprotect(q.id));
            }
        }
    }
}

impl<C> std::fmt::Debug for Dispatcher<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("scheduler", &self.sched)
            .field("queues", &self.handles.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySpec;

    fn hints(priority: i32) -> QueueHints {
        QueueHints {
            priority,
            ..QueueHints::default()
        }
    }

    #[test]
    fn operations_reach_the_handle_of_their_queue_and_unregistered_ones_nothing() {
        let mut d: Dispatcher<&'static str> = Dispatcher::new(PolicySpec::default().build());
        let dev = DeviceId(0);
        d.register(Nanos(1), QueueId(0), dev, hints(1), "low")
            .expect("fresh");
        d.register(Nanos(1), QueueId(1), dev, hints(9), "high")
            .expect("fresh");
        assert!(
            d.register(Nanos(1), QueueId(1), dev, hints(9), "again")
                .is_err()
        );
        d.event(Nanos(2), QueueEvent::Ready(QueueId(0)))
            .expect("known");
        d.event(Nanos(3), QueueEvent::Ready(QueueId(1)))
            .expect("known");
        let mut got = Vec::new();
        d.dispatch(|h, op| got.push((*h, op)));
        assert_eq!(
            got,
            vec![
                ("low", Operation::Suspend(QueueId(0))),
                ("high", Operation::Protect(QueueId(1)))
            ]
        );
        let snap = d.snapshot(|_, _| {});
        assert_eq!(snap.iter().filter(|s| s.suspended).count(), 1);
        let mut released = Vec::new();
        d.release_all(|h, op| released.push((*h, op)));
        assert_eq!(
            released,
            vec![
                ("low", Operation::Resume(QueueId(0))),
                ("high", Operation::Unprotect(QueueId(1)))
            ]
        );
        d.event(Nanos(4), QueueEvent::Unregister(QueueId(0)))
            .expect("known");
        d.event(Nanos(5), QueueEvent::Idle(QueueId(1)))
            .expect("known");
        let mut after = Vec::new();
        d.dispatch(|h, op| after.push((*h, op)));
        assert_eq!(after, vec![("high", Operation::Unprotect(QueueId(1)))]);
    }

    /// A policy that always wants the clock right now (as a bug or an unbounded hint would).
    struct Impatient;

    impl Policy for Impatient {
        fn name(&self) -> &'static str {
            "impatient"
        }
        fn schedule(&mut self, _: Nanos, _: &[QueueView], _: &mut [bool]) {}
        fn next_timer(&self) -> Option<Nanos> {
            Some(Nanos::ZERO)
        }
    }

    #[test]
    fn timers_are_spaced_even_when_the_policy_asks_for_now() {
        let mut d: Dispatcher<()> = Dispatcher::new(Box::new(Impatient));
        d.register(Nanos(1), QueueId(0), DeviceId(0), hints(0), ())
            .expect("fresh");
        d.event(Nanos(1), QueueEvent::Ready(QueueId(0)))
            .expect("known");
        d.dispatch(|_, _| {});
        assert_eq!(
            d.next_timer(),
            Some(Nanos::ZERO),
            "the first timer is the policy's"
        );
        let mut now = Nanos::from_ms(1);
        for _ in 0..5 {
            d.timeout(now);
            let next = d.next_timer().expect("still wants the clock");
            assert_eq!(next, now + MIN_TIMER_GAP);
            now = next;
        }
    }
}
