//! The hardware queue over one in-order `cl_command_queue`, at Level 1.
//!
//! A command reaches the device in one of two ways, both completed through an event callback:
//!
//! - [`OclCommand::Enqueue`]: launching performs the enqueue (Rust programs using xsched).
//! - [`OclCommand::Gated`]: the command was enqueued earlier behind a user event (the *gate*)
//!   and launching opens the gate. The interception shim uses this: the application's call is
//!   enqueued at once, so the real library validates it and its error codes reach the
//!   application unchanged, kernel arguments are captured at the call as OpenCL requires, and
//!   the device still receives the command only when the XQueue launches it.
//!
//! OpenCL has no portable way to hold queued commands or stop a running kernel, so Levels 2
//! and 3 refuse (the trait's defaults).

use crate::device;
use crate::error::OclError;
use crate::event::{Event, Retired, complete_on};
use cl3::event::CL_COMPLETE;
use cl3::types::{cl_command_queue, cl_int};
use std::sync::{Arc, Mutex};
use xsched_core::{Capabilities, DeviceId};
use xsched_runtime::{CommandError, Completion, HwError, HwQueue};

/// Enqueues one command on the raw queue and returns its event (or the OpenCL status).
pub type EnqueueFn = Box<dyn FnOnce(cl_command_queue) -> Result<Event, cl_int> + Send>;

/// What an [`OclQueue`] runs.
pub enum OclCommand {
    /// Launching calls the function, which enqueues on the queue.
    Enqueue(EnqueueFn),
    /// Already enqueued, waiting on `gate` (a user event); launching completes the gate.
    Gated {
        /// The user event the command waits for.
        gate: Event,
        /// The command's own event.
        event: Event,
    },
}

impl std::fmt::Debug for OclCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OclCommand::Enqueue(_) => f.write_str("Enqueue"),
            OclCommand::Gated { event, .. } => write!(f, "Gated({:?})", event.raw()),
        }
    }
}

/// One reference to a command queue, released when dropped.
struct RawQueue(cl_command_queue);

// SAFETY: OpenCL command queues may be used from any thread (the API is thread-safe apart from
// kernel-argument setting, which does not involve queues).
unsafe impl Send for RawQueue {}
// SAFETY: as above.
unsafe impl Sync for RawQueue {}

impl Drop for RawQueue {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference to a valid queue.
        if let Err(code) = unsafe { cl3::command_queue::release_command_queue(self.0) } {
            tracing::warn!("{}", OclError::call("clReleaseCommandQueue", code));
        }
    }
}

/// An in-order OpenCL command queue as an xsched hardware queue (Level 1).
pub struct OclQueue {
    // Declared first: on drop the retired events go before the queue they belong to.
    retired: Arc<Retired>,
    /// The last launched command's event, for `synchronize`.
    last: Mutex<Option<Event>>,
    queue: RawQueue,
    device: DeviceId,
    caps: Capabilities,
}

impl OclQueue {
    /// Schedule the in-order queue `raw` (this takes a reference of its own; the caller keeps
    /// theirs). Its device id is the device's position among all OpenCL devices, the same in
    /// every process, so a daemon sees queues of several processes on one device compete.
    ///
    /// # Safety
    /// `raw` is a valid command queue.
    pub unsafe fn from_raw(raw: cl_command_queue) -> Result<OclQueue, OclError> {
        let info =
            cl3::command_queue::get_command_queue_info(raw, cl3::command_queue::CL_QUEUE_DEVICE)
                .map_err(|c| OclError::call("clGetCommandQueueInfo", c))?;
        let device = device::device_id_of(isize::from(info) as cl3::types::cl_device_id)?;
        // SAFETY: `raw` is valid by the caller's contract.
        unsafe { cl3::command_queue::retain_command_queue(raw) }
            .map_err(|c| OclError::call("clRetainCommandQueue", c))?;
        Ok(OclQueue {
            retired: Arc::default(),
            last: Mutex::new(None),
            queue: RawQueue(raw),
            device,
            caps: device::capabilities(),
        })
    }

    /// The raw queue (still owned by `self`).
    pub fn raw(&self) -> cl_command_queue {
        self.queue.0
    }

    fn fail(done: Completion, e: &OclError) {
        done.complete(Err(CommandError::Failed(e.to_string())));
    }
}

impl HwQueue for OclQueue {
    type Command = OclCommand;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn device(&self) -> DeviceId {
        self.device
    }

    fn launch(&self, cmd: OclCommand, done: Completion) {
        self.retired.release();
        let event = match cmd {
            OclCommand::Enqueue(enqueue) => match enqueue(self.queue.0) {
                Ok(event) => event,
                Err(code) => return Self::fail(done, &OclError::call("clEnqueue*", code)),
            },
            OclCommand::Gated { gate, event } => {
                if let Err(e) = gate.set_status(CL_COMPLETE) {
                    return Self::fail(done, &e);
                }
                event
            }
        };
        match event.retained() {
            Ok(last) => {
                *self
                    .last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(last);
            }
            Err(e) => tracing::warn!("{e}"),
        }
        complete_on(event, done, self.retired.clone());
    }

    /// Waits for the last launched command's event (not `clFinish`: gated commands that were
    /// not launched yet would never finish).
    fn synchronize(&self) -> Result<(), HwError> {
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(Event::retained)
            .transpose()
            .map_err(|e| HwError::Backend(e.to_string()))?;
        if let Some(event) = last {
            event.wait().map_err(|e| HwError::Backend(e.to_string()))?;
        }
        self.retired.release();
        Ok(())
    }
}

impl Drop for OclQueue {
    fn drop(&mut self) {
        if let Err(e) = self.synchronize() {
            tracing::warn!("OpenCL queue dropped with a failed command: {e}");
        }
    }
}
