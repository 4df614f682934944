//! The hardware-queue trait: the whole contract between xsched and a backend.
//!
//! Level 1 needs `launch` (+ `synchronize`); Level 2 adds `deactivate`/`reactivate` (queued
//! hardware commands are held, the running one finishes); Level 3 adds `interrupt`/`restore`
//! (the running command stops and later continues from its saved point). The backend states
//! what it offers in its [`Capabilities`]; the default methods refuse with
//! [`HwError::Unsupported`], so a level is never silently downgraded. Progressive launching,
//! completion tracking and resume logic live once, above this trait, in the XQueue.

use crate::completion::{Completion, CompletionHook};
use crate::error::HwError;
use xsched_core::{Capabilities, DeviceId, Level};

/// One hardware queue of a device (a CUDA stream, an OpenCL command queue, a CPU-device queue).
///
/// All methods take `&self`: the launcher thread launches while the scheduler side may
/// deactivate or interrupt concurrently. Within one hardware queue, commands execute and
/// complete in launch order.
pub trait HwQueue: Send + Sync + 'static {
    /// What the backend runs (a kernel, a host callback, a vendor command).
    type Command: Send + 'static;

    /// What this queue's backend and device can do.
    fn capabilities(&self) -> &Capabilities;

    /// The device the queue belongs to (queues on one device compete).
    fn device(&self) -> DeviceId;

    /// Hand `cmd` to the hardware. The backend completes `done` when the command finished, or
    /// completes it with an error if it cannot run it. Must not wait for the command to run.
    fn launch(&self, cmd: Self::Command, done: Completion);

    /// Block until every command launched so far has completed.
    fn synchronize(&self) -> Result<(), HwError>;

    /// Called on the calling thread each time before it takes the XQueue's launch-machine
    /// lock: application threads submitting, suspending or reconfiguring, and xsched's own.
    /// A resume needs that lock, so a backend whose Level 2 lowers thread priorities (OpenCL
    /// on a CPU device) keeps these threads at their own priority: a demoted lock holder would
    /// stall the resume. Must be cheap after the first call on a thread (it runs on the hot
    /// path). The default does nothing.
    fn before_queue_lock(&self) {}

    /// Whether [`deactivate`](Self::deactivate) only lowers the queue's priority (commands
    /// launched while deactivated still run, on what the device leaves idle), so a queue held
    /// at Level 2 may keep launching when its options ask for it. The default: no.
    fn deactivation_only_lowers_priority(&self) -> bool {
        false
    }

    /// Deferred completion work: keep `hook` and run it on the thread that reports this queue's
    /// completions, as [`CompletionHook`] describes, so the XQueue refills from there instead
    /// of waking its launcher thread at every synchronization point. Called once, before the
    /// XQueue launches anything. Any error leaves the refill to the launcher thread (logged
    /// unless it is [`HwError::NoCompletionHook`]); the default offers no hook.
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        drop(hook);
        Err(HwError::NoCompletionHook)
    }

    /// Level 2: stop the device from starting this queue's queued commands.
    fn deactivate(&self) -> Result<(), HwError> {
        Err(HwError::Unsupported(Level::Deactivate))
    }

    /// Level 2: let the device start this queue's commands again.
    fn reactivate(&self) -> Result<(), HwError> {
        Err(HwError::Unsupported(Level::Deactivate))
    }

    /// Level 3: deactivate, and stop the running command at its next preemption point, keeping
    /// its progress.
    fn interrupt(&self) -> Result<(), HwError> {
        Err(HwError::Unsupported(Level::Interrupt))
    }

    /// Level 3: continue the interrupted command from its saved point, and reactivate.
    fn restore(&self) -> Result<(), HwError> {
        Err(HwError::Unsupported(Level::Interrupt))
    }
}
