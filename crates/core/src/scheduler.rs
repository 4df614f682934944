//! The scheduler: events in, suspend/resume operations out, timers on request.
//!
//! Shaped like `quinn-proto`'s connection: [`Scheduler::handle_event`] feeds input,
//! [`Scheduler::poll_operation`] drains decisions, [`Scheduler::poll_timeout`] says when it next
//! needs the clock and [`Scheduler::handle_timeout`] is called then. Decisions are taken lazily
//! on the first poll after a batch of events, so events that cancel out at one instant (a
//! pipeline stage going idle as the next stage becomes ready) produce no operations.

use crate::error::CoreError;
use crate::hint::{Hint, QueueHints};
use crate::ids::{DeviceId, QueueId};
use crate::policy::Policy;
use crate::time::Nanos;
use std::collections::{HashMap, VecDeque};

/// Input to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
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
    /// Commands of the queue were observed complete.
    Completed {
        /// The queue.
        queue: QueueId,
        /// How many commands.
        count: u32,
    },
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
    /// Other queues on its device are suspended for this ready one, under a policy that lets it
    /// run until it is idle (`Policy::protects_winners`): launch without the
    /// progressive-launching limits (threshold, in-flight budget), which exist only so that a
    /// suspend takes effect quickly (see `LaunchMachine::set_protected`).
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

/// What a policy sees of one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueView {
    /// The queue.
    pub id: QueueId,
    /// Its device.
    pub device: DeviceId,
    /// Its hints.
    pub hints: QueueHints,
    /// Whether it has work.
    pub ready: bool,
    /// When it last became ready (meaningful while `ready`).
    pub ready_since: Nanos,
    /// Commands observed complete so far.
    pub completed: u64,
}

/// Drives a [`Policy`] over the queues it is told about.
pub struct Scheduler {
    policy: Box<dyn Policy>,
    queues: Vec<QueueView>,
    index: HashMap<QueueId, usize>,
    suspended: Vec<bool>,
    protected: Vec<bool>,
    /// Devices with a suspended queue, refilled at each decision (kept to avoid allocating).
    held_devices: Vec<DeviceId>,
    run: Vec<bool>,
    ops: VecDeque<Operation>,
    dirty: bool,
    now: Nanos,
    decisions: u64,
}

impl Scheduler {
    /// A scheduler running `policy`.
    pub fn new(policy: Box<dyn Policy>) -> Scheduler {
        Scheduler {
            policy,
            queues: Vec::new(),
            index: HashMap::new(),
            suspended: Vec::new(),
            protected: Vec::new(),
            held_devices: Vec::new(),
            run: Vec::new(),
            ops: VecDeque::new(),
            dirty: false,
            now: Nanos::ZERO,
            decisions: 0,
        }
    }

    /// The running policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Replace the policy at run time; the next poll re-decides every queue.
    pub fn set_policy(&mut self, policy: Box<dyn Policy>) {
        self.policy = policy;
        self.dirty = true;
    }

    /// Feed one event observed at `now`.
    pub fn handle_event(&mut self, now: Nanos, event: Event) -> Result<(), CoreError> {
        self.now = self.now.max(now);
        match event {
            Event::Register {
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
                    completed: 0,
                });
                self.suspended.push(false);
                self.protected.push(false);
                self.run.push(true);
            }
            Event::Unregister(queue) => {
                let slot = self.slot(queue)?;
                self.queues.swap_remove(slot);
                self.suspended.swap_remove(slot);
                self.protected.swap_remove(slot);
                self.run.swap_remove(slot);
                self.index.remove(&queue);
                if let Some(moved) = self.queues.get(slot) {
                    self.index.insert(moved.id, slot);
                }
                self.ops.retain(|op| op.queue() != queue);
            }
            Event::Ready(queue) => {
                let slot = self.slot(queue)?;
                let q = &mut self.queues[slot];
                if q.ready {
                    return Ok(());
                }
                q.ready = true;
                q.ready_since = now;
            }
            Event::Idle(queue) => {
                let slot = self.slot(queue)?;
                let q = &mut self.queues[slot];
                if !q.ready {
                    return Ok(());
                }
                q.ready = false;
            }
            Event::Completed { queue, count } => {
                let slot = self.slot(queue)?;
                self.queues[slot].completed += u64::from(count);
                return Ok(());
            }
            Event::Hint { queue, hint } => {
                let slot = self.slot(queue)?;
                self.queues[slot].hints.apply(hint)?;
            }
        }
        self.dirty = true;
        Ok(())
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
        self.decisions += 1;
        self.run.fill(true);
        self.policy.schedule(self.now, &self.queues, &mut self.run);
        for (i, q) in self.queues.iter().enumerate() {
            let want_suspended = !self.run[i];
            if want_suspended != self.suspended[i] {
                self.suspended[i] = want_suspended;
                self.ops.push_back(if want_suspended {
                    Operation::Suspend(q.id)
                } else {
                    Operation::Resume(q.id)
                });
            }
        }
        // Under a priority order, a ready, running queue on a device where some queue is
        // suspended is the one the policy protects.
        let protects = self.policy.protects_winners();
        self.held_devices.clear();
        if protects {
            for (q, _) in self.queues.iter().zip(&self.suspended).filter(|(_, s)| **s) {
                if !self.held_devices.contains(&q.device) {
                    self.held_devices.push(q.device);
                }
            }
        }
        for (i, q) in self.queues.iter().enumerate() {
            let want = q.ready && !self.suspended[i] && self.held_devices.contains(&q.device);
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

    /// The queues as the policy sees them.
    pub fn queues(&self) -> &[QueueView] {
        &self.queues
    }

    /// How many times the policy was run.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("policy", &self.policy.name())
            .field("queues", &self.queues.len())
            .finish()
    }
}
