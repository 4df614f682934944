//! The launch machine of one XQueue and the payloads it has not launched yet, under one lock
//! shared by the queue's launcher thread and whoever suspends or resumes it (the scheduler
//! thread, or the application).
//!
//! Why a lock and not a message to the launcher: a suspend's hardware half (deactivate at
//! Level 2, interrupt at Level 3) then runs on the thread that decided it, one thread wake-up
//! sooner than a hop through the launcher would allow. The machine still decides what the
//! hardware must do (`HwAction`); this module only executes it, under the same lock, so a
//! suspend and a resume racing from two threads reach the hardware in the order the machine
//! took them. Critical sections are a few field updates and, when launching, the backend's
//! non-blocking `launch` calls.

use crate::completion::{Completion, CompletionSink};
use crate::error::{HwError, RuntimeError};
use crate::hwqueue::HwQueue;
use crate::launcher::Msg;
use crate::shared::Tracker;
use crossbeam_channel::Sender;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use xsched_core::{
    CommandId, CommandMeta, HwAction, LaunchConfig, LaunchMachine, Level, Nanos, Synced,
};

/// The machine and the payloads of its pending commands, in the same order.
struct Queued<C> {
    machine: LaunchMachine,
    payloads: VecDeque<C>,
}

/// One XQueue's launch machine, shared.
pub(crate) struct SharedMachine<H: HwQueue> {
    hw: Arc<H>,
    queued: Mutex<Queued<H::Command>>,
    tracker: Arc<Tracker>,
    sink: Arc<dyn CompletionSink>,
    /// Wakes the launcher when launching may have become possible.
    launcher: Sender<Msg<H::Command>>,
}

/// Carry out what the launch machine asked of the hardware.
pub(crate) fn execute<H: HwQueue>(hw: &H, action: HwAction) -> Result<(), HwError> {
    match action {
        HwAction::Nothing => Ok(()),
        HwAction::Deactivate => hw.deactivate(),
        HwAction::Interrupt => hw.interrupt(),
        HwAction::Reactivate => hw.reactivate(),
        HwAction::Restore => hw.restore(),
    }
}

impl<H: HwQueue> SharedMachine<H> {
    pub(crate) fn new(
        hw: Arc<H>,
        machine: LaunchMachine,
        tracker: Arc<Tracker>,
        sink: Arc<dyn CompletionSink>,
        launcher: Sender<Msg<H::Command>>,
    ) -> SharedMachine<H> {
        SharedMachine {
            hw,
            queued: Mutex::new(Queued {
                machine,
                payloads: VecDeque::new(),
            }),
            tracker,
            sink,
            launcher,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queued<H::Command>> {
        // A poisoned lock only means a panicking thread held it; every critical section leaves
        // the machine and the payloads consistent between statements that can panic.
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publish what queries read (pending, in flight, suspended, level).
    fn publish(&self, q: &Queued<H::Command>) {
        let m = &q.machine;
        self.tracker
            .publish_state(m.pending(), m.in_flight(), m.is_suspended(), m.level());
    }

    fn wake_launcher(&self) {
        // A closed launcher has nothing left to launch.
        let _ = self.launcher.send(Msg::Wake);
    }

    /// Enqueue a command. Returns whether the queue was idle before (report Ready).
    pub(crate) fn submit(&self, cmd: H::Command, meta: CommandMeta) -> bool {
        let mut q = self.lock();
        let (_, was_idle) = q.machine.submit(meta);
        q.payloads.push_back(cmd);
        self.publish(&q);
        was_idle
    }

    /// Launch everything the machine allows now, in order.
    pub(crate) fn launch_ready(&self, now: Nanos) {
        let mut q = self.lock();
        while let Some(launch) = q.machine.poll_launch(now) {
            let Some(cmd) = q.payloads.pop_front() else {
                tracing::error!("launch machine and payload queue disagree; dropping launch");
                break;
            };
            let done = Completion::new(self.sink.clone(), launch.cmd, launch.sync);
            self.hw.launch(cmd, done);
        }
        self.publish(&q);
    }

    /// The synchronization point at `cmd` was observed complete at `now`.
    pub(crate) fn synced(&self, cmd: CommandId, now: Nanos) -> Option<Synced> {
        let mut q = self.lock();
        let synced = q.machine.on_synced(cmd, now);
        self.publish(&q);
        synced
    }

    /// Change the machine's suspension with `f` and execute, under the lock, what it asks
    /// of the hardware.
    fn act(&self, f: impl FnOnce(&mut LaunchMachine) -> HwAction) -> Result<(), HwError> {
        let mut q = self.lock();
        let action = f(&mut q.machine);
        let result = execute(&*self.hw, action);
        self.publish(&q);
        result
    }

    /// Stop launching, and stop the hardware as the machine says.
    pub(crate) fn suspend(&self) -> Result<(), HwError> {
        self.act(LaunchMachine::suspend)
    }

    /// Undo the suspend on the hardware as the machine says, and launch again.
    pub(crate) fn resume(&self) -> Result<(), HwError> {
        let result = self.act(LaunchMachine::resume);
        self.wake_launcher();
        result
    }

    /// The queue drains and closes: undo any suspension for good.
    pub(crate) fn close(&self) -> Result<(), HwError> {
        self.act(LaunchMachine::close)
    }

    /// Lift or restore the launch limits (`Operation::Protect`).
    pub(crate) fn protect(&self, on: bool) {
        self.lock().machine.set_protected(on);
        self.wake_launcher();
    }

    /// Change the level: the backend must offer it and the queue must not be suspended.
    pub(crate) fn set_level(&self, level: Level) -> Result<(), RuntimeError> {
        self.hw.capabilities().check_level(level)?;
        let mut q = self.lock();
        if !q.machine.set_level(level) {
            return Err(RuntimeError::Suspended);
        }
        self.publish(&q);
        Ok(())
    }

    /// Change the launch config; applies to the next launch.
    pub(crate) fn set_config(&self, config: LaunchConfig) {
        self.lock().machine.set_config(config);
        self.wake_launcher();
    }

    /// Drop every pending command; returns how many.
    pub(crate) fn cancel_pending(&self) -> usize {
        let mut q = self.lock();
        let n = q.machine.cancel_pending();
        q.payloads.clear();
        self.publish(&q);
        n
    }

    /// Nothing pending and nothing in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.lock().machine.is_idle()
    }
}
