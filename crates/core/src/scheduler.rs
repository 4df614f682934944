//! The scheduler: events in, suspend/resume operations out, timers on request.
//!
//! Shaped like `quinn-proto`'s connection: [`QueueScheduler::handle_event`] feeds input,
//! [`QueueScheduler::poll_operation`] drains decisions, [`QueueScheduler::poll_timeout`] says when it next
//! needs the clock and [`QueueScheduler::handle_timeout`] is called then. Decisions are taken lazily
//! on the first poll after a batch of events, so events that cancel out at one instant (a
//! pipeline stage going idle as the next stage becomes ready) produce no operations.
//!
//! Every driver feeds the same events: a queue's registration, readiness (it has work or it is
//! idle), hints and departure. Completions are not events: a policy that needs to know how much
//! a queue has used the device reads [`QueueView::service`], the time the queue spent ready and
//! allowed to run, which the scheduler keeps from the `now` of those events alone. That costs
//! no message per synchronization point, and it is the same figure in the simulator, in
//! process and under the daemon.

use crate::error::CoreError;
use crate::hint::{Hint, QueueHints};
use crate::ids::{DeviceId, QueueId};
use crate::policy::Policy;
use crate::time::Nanos;
use crate::view::QueueView;
use std::collections::{HashMap, VecDeque};

/// Input to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueEvent {
    /// A new queue on a device, with its initial hints. It starts running.
    Register {
        /// The queue.
        queue: QueueId,
        /// Its device.
        device: DeviceId,
        /// Hints in force from the start.
        hints: QueueHints,
    },
    /// The queue is gone (closed, or its process died). It is never waited on again.
    Unregister(QueueId),
    /// The queue has work (it was empty).
    Ready(QueueId),
    /// The queue has nothing pending and nothing in flight.
    Idle(QueueId),
    /// New advice for a queue.
    Hint {
        /// The queue.
        queue: QueueId,
        /// The hint.
        hint: Hint,
    },
}

/// Output of the scheduler: what a queue must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Stop launching (and deactivate/interrupt at Levels 2/3).
    Suspend(QueueId),
    /// Launch again (and reactivate/restore).
    Resume(QueueId),
    /// Other queues on its device are suspended for this ready one, and the policy can never
    /// suspend it for another (`Policy::protectable`): launch without the progressive-launching
    /// limits (threshold, in-flight budget), which exist only so that a suspend takes effect
    /// quickly (see `LaunchMachine::set_protected`).
    Protect(QueueId),
    /// Restore the limits: nobody on the device is suspended for it any more.
    Unprotect(QueueId),
}

impl Operation {
    /// The queue the operation is for.
    pub fn queue(self) -> QueueId {
        match self {
            Operation::Suspend(q)
            | Operation::Resume(q)
            | Operation::Protect(q)
            | Operation::Unprotect(q) => q,
        }
    }
}

/// Drives a [`Policy`] over the queues it is told about.
pub struct QueueScheduler {
    policy: Box<dyn Policy>,
    queues: Vec<QueueView>,
    index: HashMap<QueueId, usize>,
    suspended: Vec<bool>,
    protected: Vec<bool>,
    /// What the policy marked protectable at the last decision (kept to avoid allocating).
    protectable: Vec<bool>,
    /// Since when each queue has been ready and running (service accrues from then).
    running_since: Vec<Option<Nanos>>,
    /// Devices with a suspended queue, refilled at each decision (kept to avoid allocating).
    held_devices: Vec<DeviceId>,
    run: Vec<bool>,
    ops: VecDeque<Operation>,
    dirty: bool,
    now: Nanos,
}

impl QueueScheduler {
    /// A scheduler running `policy`.
    pub fn new(policy: Box<dyn Policy>) -> QueueScheduler {
        QueueScheduler {
            policy,
            queues: Vec::new(),
            index: HashMap::new(),
            suspended: Vec::new(),
            protected: Vec::new(),
            protectable: Vec::new(),
            running_since: Vec::new(),
            held_devices: Vec::new(),
            run: Vec::new(),
            ops: VecDeque::new(),
            dirty: false,
            now: Nanos::ZERO,
        }
    }

    /// The running policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Replace the policy at run time; the next poll re-decides every queue. A policy that
    /// cannot work with the registered queues (`Policy::check`) is refused and changes nothing.
    pub fn set_policy(&mut self, policy: Box<dyn Policy>) -> Result<(), CoreError> {
        policy.check(&self.queues)?;
        self.policy = policy;
        self.dirty = true;
        Ok(())
    }

    /// Feed one event observed at `now`.
    pub fn handle_event(&mut self, now: Nanos, event: QueueEvent) -> Result<(), CoreError> {
        self.now = self.now.max(now);
        match event {
            QueueEvent::Register {
                queue,
                device,
                hints,
            } => {
                if self.index.contains_key(&queue) {
                    return Err(CoreError::DuplicateQueue(queue));
                }
                self.index.insert(queue, self.queues.len());
                self.queues.push(QueueView {
                    id: queue,
                    device,
                    hints,
                    ready: false,
                    ready_since: now,
                    service: Nanos::ZERO,
                });
                self.suspended.push(false);
                self.protected.push(false);
                self.running_since.push(None);
                self.run.push(true);
            }
            QueueEvent::Unregister(queue) => {
                let slot = self.slot(queue)?;
                self.queues.swap_remove(slot);
                self.suspended.swap_remove(slot);
                self.protected.swap_remove(slot);
                self.running_since.swap_remove(slot);
                self.run.swap_remove(slot);
                self.index.remove(&queue);
                if let Some(moved) = self.queues.get(slot) {
                    self.index.insert(moved.id, slot);
                }
                self.ops.retain(|op| op.queue() != queue);
            }
            QueueEvent::Ready(queue) => {
                let slot = self.slot(queue)?;
                let q = &mut self.queues[slot];
                if q.ready {
                    return Ok(());
                }
                q.ready = true;
                q.ready_since = now;
                self.account(slot, now);
            }
            QueueEvent::Idle(queue) => {
                let slot = self.slot(queue)?;
                let q = &mut self.queues[slot];
                if !q.ready {
                    return Ok(());
                }
                q.ready = false;
                self.account(slot, now);
            }
            QueueEvent::Hint { queue, hint } => {
                let slot = self.slot(queue)?;
                self.queues[slot].hints.apply(hint)?;
            }
        }
        self.dirty = true;
        Ok(())
    }

    /// Bank the service of queue `slot` up to `now` and restart its clock if it runs.
    fn account(&mut self, slot: usize, now: Nanos) {
        let q = &mut self.queues[slot];
        if let Some(since) = self.running_since[slot].take() {
            q.service += now.saturating_sub(since);
        }
        if q.ready && !self.suspended[slot] {
            self.running_since[slot] = Some(now);
        }
    }

    fn slot(&self, queue: QueueId) -> Result<usize, CoreError> {
        self.index
            .get(&queue)
            .copied()
            .ok_or(CoreError::UnknownQueue(queue))
    }

    /// The next operation to apply, deciding first if events arrived since the last decision.
    pub fn poll_operation(&mut self) -> Option<Operation> {
        if self.dirty {
            self.decide();
        }
        self.ops.pop_front()
    }

    /// When the policy next needs [`handle_timeout`](Self::handle_timeout).
    pub fn poll_timeout(&mut self) -> Option<Nanos> {
        if self.dirty {
            self.decide();
        }
        self.policy.next_timer()
    }

    /// The clock reached a time asked for by [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        self.dirty = true;
    }

    fn decide(&mut self) {
        self.dirty = false;
        let now = self.now;
        for slot in 0..self.queues.len() {
            if self.running_since[slot].is_some() {
                self.account(slot, now);
            }
        }
        self.run.fill(true);
        self.policy.schedule(self.now, &self.queues, &mut self.run);
        for i in 0..self.queues.len() {
            let want_suspended = !self.run[i];
            if want_suspended != self.suspended[i] {
                self.suspended[i] = want_suspended;
                self.account(i, now);
                let id = self.queues[i].id;
                self.ops.push_back(if want_suspended {
                    Operation::Suspend(id)
                } else {
                    Operation::Resume(id)
                });
            }
        }
        // A ready, running queue that the policy can never suspend for another, on a device
        // where some queue is suspended for it, launches without limits.
        self.protectable.clear();
        self.protectable.resize(self.queues.len(), false);
        self.policy.protectable(&self.queues, &mut self.protectable);
        self.held_devices.clear();
        for (q, _) in self.queues.iter().zip(&self.suspended).filter(|(_, s)| **s) {
            if !self.held_devices.contains(&q.device) {
                self.held_devices.push(q.device);
            }
        }
        for (i, q) in self.queues.iter().enumerate() {
            let want = self.protectable[i]
                && q.ready
                && !self.suspended[i]
                && self.held_devices.contains(&q.device);
            if want != self.protected[i] {
                self.protected[i] = want;
                self.ops.push_back(if want {
                    Operation::Protect(q.id)
                } else {
                    Operation::Unprotect(q.id)
                });
            }
        }
    }

    /// Whether the scheduler currently wants `queue` suspended.
    pub fn is_suspended(&self, queue: QueueId) -> Option<bool> {
        self.index.get(&queue).map(|&i| self.suspended[i])
    }

    /// Whether the scheduler currently has `queue` protected.
    pub fn is_protected(&self, queue: QueueId) -> Option<bool> {
        self.index.get(&queue).map(|&i| self.protected[i])
    }

    /// The queues as the policy sees them.
    pub fn queues(&self) -> &[QueueView] {
        &self.queues
    }
}

impl std::fmt::Debug for QueueScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueScheduler")
            .field("policy", &self.policy.name())
            .field("queues", &self.queues.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySpec;

    fn service_of(s: &QueueScheduler, q: u32) -> Nanos {
        s.queues()
            .iter()
            .find(|v| v.id == QueueId(q))
            .map_or(Nanos::ZERO, |v| v.service)
    }

    #[test]
    fn service_is_the_time_ready_and_running() {
        let mut s = QueueScheduler::new(PolicySpec::default().build());
        for (q, priority) in [(0, 1), (1, 9)] {
            let hints = QueueHints {
                priority,
                ..QueueHints::default()
            };
            s.handle_event(
                Nanos::ZERO,
                QueueEvent::Register {
                    queue: QueueId(q),
                    device: DeviceId(0),
                    hints,
                },
            )
            .expect("fresh");
        }
        let mut at = |t: u64, e: QueueEvent| {
            s.handle_event(Nanos(t), e).expect("known");
            while s.poll_operation().is_some() {}
        };
        at(0, QueueEvent::Ready(QueueId(0)));
        at(10, QueueEvent::Ready(QueueId(1))); // low is suspended from 10 ...
        at(30, QueueEvent::Idle(QueueId(1))); // ... to 30
        at(50, QueueEvent::Idle(QueueId(0)));
        s.handle_timeout(Nanos(80));
        let _ = s.poll_operation();
        assert_eq!(service_of(&s, 0), Nanos(30));
        assert_eq!(service_of(&s, 1), Nanos(20));
    }
}
