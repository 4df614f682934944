//! The queues' controls, shared by the agent and its link thread, so the link thread applies
//! the daemon's operations itself as it reads them.
//!
//! Why: an operation used to cost two thread wake-ups in this process (the link thread that
//! reads the frame, then the agent that applies it). On a CPU device whose worker threads keep
//! the cores busy, each wake-up can wait for a time slice, and the suspend that should demote
//! this process's device threads waited for both. Now the link
//! thread applies it: one wake-up.
//!
//! Order and staleness: the link thread applies operations in the daemon's order; the agent
//! moves to a new generation (a new link, or giving up on one) under the same lock, so a link
//! thread of an old generation applies nothing once the agent has moved on, and the agent's
//! "resume everything" after losing the daemon is never overtaken by a late suspend.

use crate::scheduler::Control;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use xsched_core::{Operation, QueueId};
use xsched_proto::DaemonMsg;

struct Inner {
    generation: u64,
    map: BTreeMap<QueueId, Control>,
}

/// Every queue's control, and the link generation allowed to use them.
pub(super) struct Controls(Mutex<Inner>);

impl Controls {
    pub(super) fn new() -> Controls {
        Controls(Mutex::new(Inner {
            generation: 0,
            map: BTreeMap::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A control that panicked left the map as it was.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn insert(&self, queue: QueueId, control: Control) {
        self.lock().map.insert(queue, control);
    }

    pub(super) fn remove(&self, queue: QueueId) {
        self.lock().map.remove(&queue);
    }

    /// The agent moved to `generation`: links of other generations apply nothing from now on.
    pub(super) fn set_generation(&self, generation: u64) {
        self.lock().generation = generation;
    }

    /// Apply `op` for a link of `generation`; false (nothing applied) if that link is stale.
    pub(super) fn apply_from(&self, generation: u64, op: Operation) -> bool {
        let inner = self.lock();
        if inner.generation != generation {
            return false;
        }
        if let Some(control) = inner.map.get(&op.queue()) {
            control(op);
        }
        true
    }

    /// Resume and unprotect every queue (nobody schedules them now).
    pub(super) fn resume_all(&self) {
        resume_each(&self.lock().map);
    }

    /// The agent is ending: resume and unprotect every queue, then drop every control and let
    /// no link apply anything. A link thread still in its handshake (up to 2 s) holds these
    /// controls, and would otherwise keep every queue's machine alive until it ends.
    pub(super) fn retire(&self) {
        let mut inner = self.lock();
        resume_each(&inner.map);
        inner.map.clear();
        // The agent's generations count up from 1; no link has this one.
        inner.generation = u64::MAX;
    }
}

fn resume_each(map: &BTreeMap<QueueId, Control>) {
    for (&id, control) in map {
        control(Operation::Resume(id));
        control(Operation::Unprotect(id));
    }
}

/// The queue operation a daemon frame carries, if it is one.
pub(super) fn operation(msg: &DaemonMsg) -> Option<Operation> {
    Some(match *msg {
        DaemonMsg::Suspend { queue } => Operation::Suspend(QueueId(queue)),
        DaemonMsg::Resume { queue } => Operation::Resume(QueueId(queue)),
        DaemonMsg::Protect {
            queue,
            protected: true,
        } => Operation::Protect(QueueId(queue)),
        DaemonMsg::Protect {
            queue,
            protected: false,
        } => Operation::Unprotect(QueueId(queue)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn recording(controls: &Controls, queue: u32) -> Arc<Mutex<Vec<Operation>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        controls.insert(
            QueueId(queue),
            Box::new(move |op| log.lock().expect("log").push(op)),
        );
        seen
    }

    #[test]
    fn a_current_link_applies_in_order_and_a_stale_one_applies_nothing() {
        let c = Controls::new();
        let seen = recording(&c, 1);
        c.set_generation(3);
        assert!(c.apply_from(3, Operation::Suspend(QueueId(1))));
        assert!(c.apply_from(3, Operation::Resume(QueueId(1))));
        assert!(
            c.apply_from(3, Operation::Suspend(QueueId(9))),
            "unknown queue: ignored"
        );
        c.set_generation(4);
        assert!(!c.apply_from(3, Operation::Suspend(QueueId(1))), "stale");
        c.resume_all();
        assert_eq!(
            *seen.lock().expect("log"),
            [
                Operation::Suspend(QueueId(1)),
                Operation::Resume(QueueId(1)),
                Operation::Resume(QueueId(1)),
                Operation::Unprotect(QueueId(1)),
            ]
        );
        c.remove(QueueId(1));
        assert!(c.apply_from(4, Operation::Suspend(QueueId(1))));
        assert_eq!(
            seen.lock().expect("log").len(),
            4,
            "a removed queue gets nothing"
        );
    }

    #[test]
    fn a_retired_agent_resumes_everything_and_keeps_no_control() {
        let c = Controls::new();
        let seen = recording(&c, 1);
        let machine = Arc::new(());
        let held = machine.clone();
        c.insert(
            QueueId(2),
            Box::new(move |_| {
                let _ = &held;
            }),
        );
        c.set_generation(5);
        c.retire();
        assert_eq!(
            *seen.lock().expect("log"),
            [
                Operation::Resume(QueueId(1)),
                Operation::Unprotect(QueueId(1))
            ]
        );
        assert_eq!(Arc::strong_count(&machine), 1, "the controls are dropped");
        assert!(
            !c.apply_from(5, Operation::Suspend(QueueId(1))),
            "no link applies"
        );
        assert_eq!(seen.lock().expect("log").len(), 2);
    }

    #[test]
    fn only_suspend_resume_and_protect_are_operations() {
        let q = |queue| QueueId(queue);
        assert_eq!(
            operation(&DaemonMsg::Suspend { queue: 2 }),
            Some(Operation::Suspend(q(2)))
        );
        assert_eq!(
            operation(&DaemonMsg::Resume { queue: 2 }),
            Some(Operation::Resume(q(2)))
        );
        assert_eq!(
            operation(&DaemonMsg::Protect {
                queue: 2,
                protected: false
            }),
            Some(Operation::Unprotect(q(2)))
        );
        assert_eq!(operation(&DaemonMsg::Pong { seq: 1 }), None);
    }
}
