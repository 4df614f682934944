//! The launch machine of one XQueue and the payloads it has not launched yet, under one lock
//! shared by every thread that acts on the queue: the application's submitting threads, the
//! scheduler (or the application) suspending and resuming it, and the queue's launcher thread.
//!
//! Why a lock and not messages to the launcher: whoever changes the machine launches what it
//! then allows, on its own thread, at once. A submit into a queue with room under its limits
//! launches inline (the application's thread opens the gate itself); a resume, a protection or a
//! new config launches what was waiting, on the thread that decided it; a suspend's hardware half
//! (deactivate at Level 2, interrupt at Level 3) runs there too. Each of these is a thread
//! wake-up the launcher hop used to cost. The launcher thread is left with what must wait for
//! the hardware: launches that become possible when a synchronization point completes. The
//! machine still decides what the hardware must do (`HwAction`) and what to launch, in order;
//! this module only executes it, under the same lock, so concurrent submitters, a suspend and a
//! resume reach the hardware in the order the machine took them. Critical sections are a few
//! field updates and the backend's non-blocking `launch` calls.

mod control;

use crate::account::Ledger;
use crate::clock;
use crate::completion::{Completion, CompletionSink};
use crate::hwqueue::HwQueue;
use crate::scheduler::SchedLink;
use crate::shared::Tracker;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use xsched_core::{CommandId, CommandMeta, LaunchMachine, Nanos, QueueEvent, Synced};

/// How long the completing thread tries for a queue's lock before it leaves a synchronization
/// point to the launcher thread (`SharedMachine::try_observe_and_refill`).
pub(crate) const REFILL_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(1);
/// The machine and the payloads of its pending commands, in the same order, with the
/// submission times of the commands not yet observed complete.
struct Queued<C> {
    machine: LaunchMachine,
    payloads: VecDeque<C>,
    ledger: Ledger,
    /// Commands submitted so far.
    submitted: u64,
    /// When the command completed whose observation left launchable work waiting: the next
    /// launch refills the queue, and the time between is the launch gap the machine learns.
    refill_from: Option<Nanos>,
}

/// One XQueue's launch machine, shared.
pub(crate) struct SharedMachine<H: HwQueue> {
    hw: Arc<H>,
    queued: Mutex<Queued<H::Command>>,
    tracker: Arc<Tracker>,
    sink: Arc<dyn CompletionSink>,
    /// The sink of tails, whose completions are observed only when nothing later covers them.
    tail_sink: Arc<dyn CompletionSink>,
    /// The queue's line to its scheduler, if it has one: Ready and Idle are decided and sent
    /// under the lock, so they reach the scheduler in the order the machine went through them,
    /// whichever thread submits or observes.
    events: Option<SchedLink>,
}

/// What observing a synchronization point found.
pub(crate) struct Observed {
    /// What the machine says completed.
    pub(crate) synced: Synced,
    /// The recent P99 (ns) to publish, when a period ended.
    pub(crate) p99: Option<u64>,
}

impl<H: HwQueue> SharedMachine<H> {
    pub(crate) fn new(
        hw: Arc<H>,
        machine: LaunchMachine,
        tracker: Arc<Tracker>,
        sinks: [Arc<dyn CompletionSink>; 2],
        events: Option<SchedLink>,
    ) -> SharedMachine<H> {
        tracker.publish_batch(machine.config().batch());
        let [sink, tail_sink] = sinks;
        SharedMachine {
            hw,
            queued: Mutex::new(Queued {
                machine,
                payloads: VecDeque::new(),
                ledger: Ledger::new(clock::now()),
                submitted: 0,
                refill_from: None,
            }),
            tracker,
            sink,
            tail_sink,
            events,
        }
    }

    /// Ready, unless it was reported since the last Idle (the caller holds the lock).
    fn report_ready(&self) {
        if let Some(e) = &self.events
            && self.tracker.claim_ready_report()
        {
            e.event(QueueEvent::Ready(e.queue()));
        }
    }

    /// Idle, then allow the next Ready (the caller holds the lock).
    fn report_idle(&self) {
        if let Some(e) = &self.events {
            e.event(QueueEvent::Idle(e.queue()));
        }
        self.tracker.reset_ready_report();
    }

    fn lock(&self) -> MutexGuard<'_, Queued<H::Command>> {
        self.hw.before_queue_lock();
        // A poisoned lock only means a panicking thread held it; every critical section leaves
        // the machine and the payloads consistent between statements that can panic.
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publish what queries read (pending, in flight, suspended, level), and where to refill
    /// from when a budget blocks launching.
    fn publish(&self, q: &Queued<H::Command>) {
        let m = &q.machine;
        self.tracker.refill_at(m.refill_point());
        self.tracker
            .publish_state(m.pending(), m.in_flight(), m.is_suspended(), m.level());
    }

    /// Launch, on this thread, everything the machine allows now, in order.
    fn launch_locked(&self, q: &mut Queued<H::Command>, now: Nanos) {
        let refill_from = q.refill_from.take();
        let mut launched = false;
        while let Some(launch) = q.machine.poll_launch(now) {
            let Some(cmd) = q.payloads.pop_front() else {
                tracing::error!("launch machine and payload queue disagree; dropping launch");
                break;
            };
            let sink = if launch.tail {
                &self.tail_sink
            } else {
                &self.sink
            };
            let done = Completion::new(sink.clone(), launch.cmd, launch.sync);
            self.tracker.launching(launch.cmd);
            self.hw.launch(cmd, done);
            q.ledger.launched(launch.cmd, now, q.machine.in_flight());
            if !launched && let Some(from) = refill_from {
                let gap = clock::now().saturating_sub(from);
                q.machine.observe_launch_gap(gap);
            }
            launched = true;
        }
    }

    /// Enqueue a command at `now` and launch what the machine allows, on this thread (the
    /// command itself, when the queue has room and is not suspended). Returns whether the
    /// queue was idle before (report Ready).
    pub(crate) fn submit(&self, cmd: H::Command, meta: CommandMeta, now: Nanos) -> bool {
        let mut q = self.lock();
        let (_, was_idle) = q.machine.submit(meta);
        if was_idle {
            self.report_ready();
        }
        q.payloads.push_back(cmd);
        let suspended = q.machine.is_suspended();
        q.ledger.submitted(now, suspended);
        q.submitted += 1;
        self.launch_locked(&mut q, now);
        self.publish(&q);
        was_idle
    }

    /// Launch everything the machine allows now, in order.
    pub(crate) fn launch_ready(&self, now: Nanos) {
        let mut q = self.lock();
        self.launch_locked(&mut q, now);
        self.publish(&q);
    }

    /// The synchronization point at `cmd`, completed at `completed_at` if the backend said
    /// when, was observed complete at `now` (the caller holds the lock; an idle queue is
    /// reported idle).
    fn synced_locked(
        &self,
        q: &mut Queued<H::Command>,
        cmd: CommandId,
        completed_at: Option<Nanos>,
        now: Nanos,
    ) -> Option<Observed> {
        let synced = q.machine.on_synced(cmd, now);
        if synced.is_some() && q.machine.can_launch() {
            q.refill_from = completed_at;
        }
        if synced.is_some_and(|s| s.now_idle) {
            self.report_idle();
        }
        synced.map(|synced| Observed {
            p99: q.ledger.completed(synced.last, completed_at, now),
            synced,
        })
    }

    /// Publish what an observation found to the queue's readers and waiters (after the
    /// machine published its state, so whoever the completion wakes sees a query that agrees).
    fn publish_observed(&self, observed: &Observed) {
        if let Some(p99) = observed.p99 {
            self.tracker.publish_recent_p99(p99);
        }
        self.tracker.publish_done(observed.synced.last.0 + 1);
    }

    /// The synchronization point at `cmd`, completed at `completed_at` if the backend said
    /// when, is observed complete now: what the machine says completed, published.
    pub(crate) fn observe(&self, cmd: CommandId, completed_at: Option<Nanos>) -> Option<Synced> {
        let observed = {
            let mut q = self.lock();
            let observed = self.synced_locked(&mut q, cmd, completed_at, clock::now());
            self.publish(&q);
            observed
        }?;
        self.publish_observed(&observed);
        Some(observed.synced)
    }

    /// What the launcher does for a synchronization point, at once and under one lock, on the
    /// thread that completed it (the backend's completion hook): observe it and launch what
    /// it makes possible. Only if the queue's lock comes free within [`REFILL_LOCK_WAIT`];
    /// `false` (nothing done) otherwise, and the caller hands the point to the launcher thread. The completing thread
    /// must never wait for that lock: its holder may be launching into a full device queue,
    /// waiting for the room only the completing thread makes.
    pub(crate) fn try_observe_and_refill(
        &self,
        cmd: CommandId,
        completed_at: Option<Nanos>,
        now: Nanos,
    ) -> bool {
        self.hw.before_queue_lock();
        let start = std::time::Instant::now();
        let mut q = loop {
            match self.queued.try_lock() {
                Ok(q) => break q,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                // A submit holds it for microseconds; a launch into a full device queue holds
                // it until this thread makes room.
                Err(std::sync::TryLockError::WouldBlock) if start.elapsed() < REFILL_LOCK_WAIT => {
                    std::thread::yield_now();
                }
                Err(std::sync::TryLockError::WouldBlock) => return false,
            }
        };
        let observed = {
            let observed = self.synced_locked(&mut q, cmd, completed_at, now);
            self.launch_locked(&mut q, now);
            self.publish(&q);
            observed
        };
        drop(q);
        if let Some(observed) = observed {
            self.publish_observed(&observed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::{Completion, CompletionSink};
    use crate::shared::Tracker;
    use crate::{CommandError, HwError};
    use xsched_core::{Capabilities, CommandId, DeviceId, LaunchMachine, Level};

    /// A queue that runs nothing.
    struct Idle(Capabilities);

    impl HwQueue for Idle {
        type Command = ();
        fn capabilities(&self) -> &Capabilities {
            &self.0
        }
        fn device(&self) -> DeviceId {
            DeviceId(0)
        }
        fn launch(&self, _: (), _: Completion) {}
        fn synchronize(&self) -> Result<(), HwError> {
            Ok(())
        }
    }

    struct Nowhere;

    impl CompletionSink for Nowhere {
        fn complete(&self, _: CommandId, _: bool, _: Result<(), CommandError>) {}
    }

    #[test]
    fn the_completing_threads_refill_gives_up_on_a_lock_held_longer_than_its_wait() {
        let caps = Capabilities {
            max_level: Level::Block,
            native_arbitration: String::new(),
            preemption_unit: String::new(),
            keeps_state: false,
            hardware_priority: false,
        };
        let options = crate::QueueOptions::default();
        let machine = SharedMachine::new(
            Arc::new(Idle(caps)),
            LaunchMachine::new(options.config, Level::Block),
            Arc::new(Tracker::new(Level::Block)),
            [Arc::new(Nowhere), Arc::new(Nowhere)],
            None,
        );
        // Held (as by a launch waiting for room on the device): it gives up, nothing done.
        let held = machine.lock();
        let start = std::time::Instant::now();
        assert!(!machine.try_observe_and_refill(CommandId(1), None, Nanos(0)));
        assert!(start.elapsed() >= REFILL_LOCK_WAIT);
        drop(held);
        // Free: it refills.
        assert!(machine.try_observe_and_refill(CommandId(1), None, Nanos(0)));
    }
}
