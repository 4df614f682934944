//! What an operator or the daemon asks of one running queue beyond scheduling: its rollout mode
//! (`XQueue::set_mode`, `xsched mode set`) and its share of its tenant's bounds (the daemon's
//! `[limits] tenant_*`). Both change the queue's launch config, so they live together: the
//! config a progressive mode launches with is the queue's own with its in-flight budget capped
//! by the tenant's share, and its pending bound is the smaller of its own and the share.

use crate::error::{HwError, RuntimeError};
use crate::hwqueue::HwQueue;
use crate::machine::SharedMachine;
use crate::mode::{ModeCell, RolloutMode};
use crate::scheduler::Steer;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use xsched_core::{LaunchConfig, Level, Nanos, Operation};

/// A queue's steering: its mode, its own launch config and bounds, and its tenant's shares.
pub(crate) struct Steering<H: HwQueue> {
    machine: Arc<SharedMachine<H>>,
    pub(crate) mode: Arc<ModeCell>,
    /// The config the progressive modes (and a queue in no mode) launch with: the queue's own,
    /// or the default one for a queue created observing (whose own is unbounded).
    own_config: LaunchConfig,
    own_max_pending: Option<NonZeroUsize>,
    max_level: Level,
    /// The tenant's share of pending commands (0: none).
    tenant_pending: AtomicUsize,
    /// The tenant's share of in-flight device time, in ns (0: none).
    tenant_inflight: AtomicU64,
    /// Serializes mode switches, bound changes and the scheduler's operations (each reads the
    /// others' state).
    changing: Mutex<()>,
}

impl<H: HwQueue> Steering<H> {
    pub(crate) fn new(
        machine: Arc<SharedMachine<H>>,
        mode: Arc<ModeCell>,
        options: &crate::QueueOptions,
        max_level: Level,
    ) -> Steering<H> {
        let own_config = match options.mode {
            Some(RolloutMode::Observe) => crate::QueueOptions::default().config,
            _ => options.config,
        };
        Steering {
            machine,
            mode,
            own_config,
            own_max_pending: options.max_pending,
            max_level,
            tenant_pending: AtomicUsize::new(0),
            tenant_inflight: AtomicU64::new(0),
            changing: Mutex::new(()),
        }
    }

    /// Carry out `steer`.
    pub(crate) fn apply(&self, steer: Steer) -> Result<(), RuntimeError> {
        let _one_at_a_time = self
            .changing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match steer {
            Steer::Mode(m) => {
                self.mode.set(m);
                let (level, config) = m.setting(self.max_level, self.capped());
                let observe = m == RolloutMode::Observe;
                self.machine
                    .switch(level, config, (self.mode.wanted_held(), observe))
            }
            Steer::Bounds {
                max_pending,
                inflight,
            } => {
                self.tenant_pending
                    .store(max_pending.map_or(0, NonZeroUsize::get), Ordering::SeqCst);
                self.tenant_inflight
                    .store(inflight.map_or(0, |n| n.0.max(1)), Ordering::SeqCst);
                // An observed queue launches unbounded whatever the tenant's share.
                if !self.mode.observing() {
                    self.machine.set_config(self.capped());
                }
                Ok(())
            }
        }
    }

    /// Carry out a scheduler's `op` (its link thread's, in the agent), under the lock a mode
    /// switch takes: an observed queue is never held, and a switch to observe mode on another
    /// thread cannot slip between the check for it and the suspend (which would hold the
    /// observed queue until the next resume).
    pub(crate) fn operate(&self, op: Operation) -> Result<(), HwError> {
        let _one_at_a_time = self
            .changing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match op {
            Operation::Suspend(_) => self.mode.scheduler_wants_held(true),
            Operation::Resume(_) => self.mode.scheduler_wants_held(false),
            Operation::Protect(_) | Operation::Unprotect(_) => {}
        }
        match op {
            // An observed queue is never held: it launches as it would natively.
            Operation::Suspend(_) | Operation::Protect(_) if self.mode.observing() => Ok(()),
            Operation::Suspend(_) => self.machine.suspend(),
            Operation::Resume(_) => self.machine.resume(),
            Operation::Protect(_) | Operation::Unprotect(_) => {
                self.machine.protect(matches!(op, Operation::Protect(_)));
                Ok(())
            }
        }
    }

    /// The queue's own config, its in-flight budget capped by the tenant's share.
    fn capped(&self) -> LaunchConfig {
        let share = match self.tenant_inflight.load(Ordering::SeqCst) {
            0 => return self.own_config,
            ns => Nanos(ns),
        };
        let budget = self
            .own_config
            .inflight_budget()
            .map_or(share, |own| own.min(share));
        self.own_config.with_inflight_budget(Some(budget))
    }

    /// The pending bound in force: the smaller of the queue's own and the tenant's share.
    pub(crate) fn max_pending(&self) -> Option<usize> {
        let own = self.own_max_pending.map(NonZeroUsize::get);
        match (own, self.tenant_pending.load(Ordering::SeqCst)) {
            (own, 0) => own,
            (None, share) => Some(share),
            (Some(own), share) => Some(own.min(share)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommandError;
    use crate::completion::{Completion, CompletionSink};
    use crate::shared::Tracker;
    use std::sync::atomic::{AtomicBool, AtomicU32};
    use std::time::Duration;
    use xsched_core::{Capabilities, CommandId, DeviceId, LaunchMachine, QueueId};

    /// A Level-2 queue that counts its deactivations; it never runs a command.
    struct Held {
        caps: Capabilities,
        deactivated: AtomicU32,
    }

    impl HwQueue for Held {
        type Command = ();
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        fn device(&self) -> DeviceId {
            DeviceId(0)
        }
        fn launch(&self, _: (), _: Completion) {}
        fn synchronize(&self) -> Result<(), HwError> {
            Ok(())
        }
        fn deactivate(&self) -> Result<(), HwError> {
            self.deactivated.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn reactivate(&self) -> Result<(), HwError> {
            Ok(())
        }
    }

    struct Nowhere;

    impl CompletionSink for Nowhere {
        fn complete(&self, _: CommandId, _: bool, _: Result<(), CommandError>) {}
    }

    #[test]
    fn a_suspend_waits_for_a_switch_to_observe_and_then_holds_nothing() {
        let hw = Arc::new(Held {
            caps: Capabilities {
                max_level: Level::Deactivate,
                native_arbitration: String::new(),
                preemption_unit: String::new(),
                keeps_state: false,
                hardware_priority: false,
            },
            deactivated: AtomicU32::new(0),
        });
        let options = crate::QueueOptions::default();
        let machine = Arc::new(SharedMachine::new(
            hw.clone(),
            LaunchMachine::new(options.config, Level::Deactivate),
            Arc::new(Tracker::new(Level::Deactivate)),
            [Arc::new(Nowhere), Arc::new(Nowhere)],
            None,
        ));
        let steering = Arc::new(Steering::new(
            machine,
            Arc::new(ModeCell::new(None)),
            &options,
            Level::Deactivate,
        ));
        // A switch to observe mode in progress (what `apply` holds while it switches).
        let switching = steering
            .changing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let done = Arc::new(AtomicBool::new(false));
        let suspend = {
            let (steering, done) = (steering.clone(), done.clone());
            std::thread::spawn(move || {
                let result = steering.operate(Operation::Suspend(QueueId(0)));
                done.store(true, Ordering::SeqCst);
                result
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "the suspend waits for the switch"
        );
        steering.mode.set(RolloutMode::Observe);
        drop(switching);
        suspend.join().expect("thread").expect("suspend");
        assert_eq!(
            hw.deactivated.load(Ordering::SeqCst),
            0,
            "the observed queue was not held"
        );
        assert!(
            steering.mode.wanted_held(),
            "held once it leaves observe mode"
        );
    }
}
