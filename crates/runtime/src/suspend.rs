//! Applying suspend and resume: who calls the hardware, and how it is undone.
//!
//! A suspend has two halves: the launcher must stop launching (a message to its thread), and at
//! Levels 2/3 the hardware must stop too. The hardware half is done right here, on the thread
//! that decided (the scheduler thread, or the application), so a preemption costs one thread
//! wake-up fewer than routing it through the launcher. What was applied is remembered, and a
//! resume undoes exactly that, whatever the queue's level is by then; after close nothing
//! suspends the hardware again, so a draining queue can never be left held.

use crate::error::HwError;
use crate::hwqueue::HwQueue;
use crate::launcher::Msg;
use crate::shared::Tracker;
use crossbeam_channel::Sender;
use std::sync::{Arc, Mutex};
use xsched_core::Level;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Applied {
    Nothing,
    Deactivated,
    Interrupted,
    Closed,
}

/// Suspends and resumes one XQueue (launcher and hardware together).
pub(crate) struct Suspender<H: HwQueue> {
    hw: Arc<H>,
    tracker: Arc<Tracker>,
    launcher: Sender<Msg<H::Command>>,
    applied: Mutex<Applied>,
}

impl<H: HwQueue> Suspender<H> {
    pub(crate) fn new(
        hw: Arc<H>,
        tracker: Arc<Tracker>,
        launcher: Sender<Msg<H::Command>>,
    ) -> Suspender<H> {
        Suspender {
            hw,
            tracker,
            launcher,
            applied: Mutex::new(Applied::Nothing),
        }
    }

    /// Stop launching, and stop the hardware as the queue's level says.
    pub(crate) fn suspend(&self) -> Result<(), HwError> {
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *applied == Applied::Closed {
            return Ok(());
        }
        let _ = self.launcher.send(Msg::Suspend);
        if *applied != Applied::Nothing {
            return Ok(());
        }
        match self.tracker.level() {
            Level::Block => Ok(()),
            Level::Deactivate => {
                self.hw.deactivate()?;
                *applied = Applied::Deactivated;
                Ok(())
            }
            Level::Interrupt => {
                self.hw.interrupt()?;
                *applied = Applied::Interrupted;
                Ok(())
            }
        }
    }

    /// Undo what the last suspend did to the hardware, and launch again.
    pub(crate) fn resume(&self) -> Result<(), HwError> {
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = self.undo(*applied);
        if *applied != Applied::Closed {
            *applied = Applied::Nothing;
        }
        let _ = self.launcher.send(Msg::Resume);
        result
    }

    /// The queue is closing: undo any hardware suspension and refuse new ones.
    pub(crate) fn close(&self) {
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = self.undo(*applied) {
            tracing::warn!("resuming a closing queue: {e}");
        }
        *applied = Applied::Closed;
    }

    fn undo(&self, applied: Applied) -> Result<(), HwError> {
        match applied {
            Applied::Nothing | Applied::Closed => Ok(()),
            Applied::Deactivated => self.hw.reactivate(),
            Applied::Interrupted => self.hw.restore(),
        }
    }
}
