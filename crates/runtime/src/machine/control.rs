//! What a suspend, a resume and a change of level or config do to one XQueue's launch machine:
//! the machine decides, and this module executes what it asks of the hardware, under the queue's
//! lock, then launches what the change allows (here, on the thread that decided it).

use super::SharedMachine;
use crate::account::QueueAccount;
use crate::clock;
use crate::error::{HwError, RuntimeError};
use crate::hwqueue::HwQueue;
use std::ops::Range;
use std::time::Duration;
use xsched_core::{HwAction, LaunchConfig, LaunchMachine, Level, Nanos};

/// How long a hardware action begun at `start` took (zero for none: a Level-1 suspend).
fn timed(action: HwAction, start: std::time::Instant) -> std::time::Duration {
    if action == HwAction::Nothing {
        std::time::Duration::ZERO
    } else {
        start.elapsed()
    }
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
        let mut q = self.lock();
        let action = q.machine.suspend();
        let start = std::time::Instant::now();
        let result = execute(&*self.hw, action);
        let cost = timed(action, start);
        let (pending, in_flight) = (q.machine.pending(), q.machine.in_flight());
        let interrupt = action == HwAction::Interrupt;
        q.ledger.suspended(
            clock::now(),
            pending + in_flight,
            in_flight,
            cost,
            interrupt,
        );
        self.publish(&q);
        result
    }

    /// Undo the suspend on the hardware as the machine says, and launch what waited (here).
    pub(crate) fn resume(&self) -> Result<(), HwError> {
        let mut q = self.lock();
        let action = q.machine.resume();
        let start = std::time::Instant::now();
        let result = execute(&*self.hw, action);
        let now = clock::now();
        q.ledger.resumed(now, timed(action, start));
        self.launch_locked(&mut q, now);
        self.publish(&q);
        result
    }

    /// Commands completing later than `bound` after submission count as latency misses.
    pub(crate) fn set_latency_bound(&self, bound: Option<Nanos>) {
        self.lock().ledger.set_latency_bound(bound);
    }

    /// The queue's accounting so far, with the backend's device time where it reports one.
    pub(crate) fn account(&self) -> QueueAccount {
        let mut account = self.lock().ledger.account(clock::now());
        if let Some(measured) = self.tracker.device_time() {
            account.device_time = measured;
            account.device_time_measured = true;
        }
        account
    }

    /// The queue drains and closes: undo any suspension for good.
    pub(crate) fn close(&self) -> Result<(), HwError> {
        self.act(LaunchMachine::close)
    }

    /// Lift or restore the launch limits (`Operation::Protect`), and launch what the lifted
    /// limits allow (here).
    pub(crate) fn protect(&self, on: bool) {
        let mut q = self.lock();
        q.machine.set_protected(on);
        self.launch_locked(&mut q, clock::now());
        self.publish(&q);
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

    /// Switch to `level` and `config` at once, under the lock: the queue is resumed for the
    /// switch and is held afterwards, at the new level, if it was held before (by its
    /// application or scheduler) or `hold` (its scheduler suspended it while it was observed)
    /// and not `release` (observe mode, which nobody holds); what the new config allows is
    /// launched (here).
    pub(crate) fn switch(
        &self,
        level: Level,
        config: LaunchConfig,
        (hold, release): (bool, bool),
    ) -> Result<(), RuntimeError> {
        self.hw.capabilities().check_level(level)?;
        let mut q = self.lock();
        let held = q.machine.is_suspended();
        let mut result = Ok(());
        if held {
            let action = q.machine.resume();
            result = execute(&*self.hw, action);
        }
        // Not suspended now, so the level changes.
        let _ = q.machine.set_level(level);
        q.machine.set_config(config);
        self.tracker.publish_batch(config.batch());
        let now = clock::now();
        if (held || hold) && !release {
            let action = q.machine.suspend();
            result = result.and(execute(&*self.hw, action));
            let (pending, in_flight) = (q.machine.pending(), q.machine.in_flight());
            if !held {
                q.ledger
                    .suspended(now, pending + in_flight, in_flight, Duration::ZERO, false);
            }
        } else if held {
            q.ledger.resumed(now, Duration::ZERO);
        }
        self.launch_locked(&mut q, now);
        self.publish(&q);
        Ok(result?)
    }

    /// The launch config in force.
    pub(crate) fn config(&self) -> LaunchConfig {
        self.lock().machine.config()
    }

    /// Change the launch config, and launch what it now allows (here).
    pub(crate) fn set_config(&self, config: LaunchConfig) {
        let mut q = self.lock();
        q.machine.set_config(config);
        self.tracker.publish_batch(config.batch());
        self.launch_locked(&mut q, clock::now());
        self.publish(&q);
    }

    /// Drop every pending command; the ids of those dropped (the newest ones).
    pub(crate) fn cancel_pending(&self) -> Range<u64> {
        let mut q = self.lock();
        let n = q.machine.cancel_pending();
        q.payloads.clear();
        q.ledger.cancelled(n);
        self.publish(&q);
        q.submitted - n as u64..q.submitted
    }

    /// Nothing pending and nothing in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.lock().machine.is_idle()
    }

    /// Report Idle if the queue is idle (after a cancel, or when closing); whether it is.
    pub(crate) fn report_if_idle(&self) -> bool {
        let q = self.lock();
        let idle = q.machine.is_idle();
        if idle {
            self.report_idle();
        }
        idle
    }
}
