//! The hardware queue over one in-order `cl_command_queue`: Level 1, and Level 2 on a CPU device.
//!
//! A command reaches the device in one of two ways, both completed through an event callback:
//!
//! - [`OclCommand::Enqueue`]: launching performs the enqueue (Rust programs using xsched).
//! - [`OclCommand::Gated`]: the command was enqueued earlier behind a user event (the *gate*,
//!   made by [`OclQueue::enqueue_gated`]) and launching opens the gate. The interception shim
//!   uses this: the application's call is enqueued at once, so the real library validates it
//!   and its error codes reach the application unchanged, kernel arguments are captured at the
//!   call as OpenCL requires, and the device still receives the command only when the XQueue
//!   launches it. A gated command dropped without being launched opens its gate, so the
//!   application's command still runs (the CUDA backend's `Ticket` keeps the same contract).
//!
//! OpenCL has no portable way to hold queued commands or stop a running kernel, so on GPUs,
//! NPUs and FPGAs Levels 2 and 3 refuse (the trait's defaults). On a CPU device the kernels run
//! on this process's threads, and Level 2 holds them by thread priority (`demote.rs`) where the
//! process may undo it; Level 3 refuses everywhere.

use crate::demote;
use crate::device;
use crate::error::OclError;
use crate::event::{Event, Retired, complete_on};
use crate::hook::{self, HookSlot};
use cl3::event::CL_COMPLETE;
use cl3::types::{cl_command_queue, cl_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use xsched_core::{Capabilities, DeviceId, Level};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue};

/// Enqueues one command on the raw queue and returns its event (or the OpenCL status). It may
/// run on OpenCL's callback thread (a refill after a synchronization point), so it must not
/// block: no `clFinish`, `clWaitForEvents` or blocking enqueue.
pub type EnqueueFn = Box<dyn FnOnce(cl_command_queue) -> Result<Event, cl_int> + Send>;

/// What an [`OclQueue`] runs.
pub enum OclCommand {
    /// Launching calls the function, which enqueues on the queue.
    Enqueue(EnqueueFn),
    /// Already enqueued, waiting on `gate`; launching opens the gate.
    Gated {
        /// The user event the command waits for.
        gate: Gate,
        /// The command's own event.
        event: Event,
    },
}

/// The user event a gated command waits for: opened when the command is launched, or when it
/// is dropped without being launched (so the application's command is never left waiting).
pub struct Gate(Option<Event>);

impl Gate {
    /// A new, closed gate in `context`.
    pub fn new(context: cl3::types::cl_context) -> Result<Gate, OclError> {
        Ok(Gate(Some(Event::user(context)?)))
    }

    /// The event to put in a wait list.
    pub fn raw(&self) -> cl3::types::cl_event {
        self.0.as_ref().map_or(std::ptr::null_mut(), Event::raw)
    }

    /// Let the command run.
    pub fn open(mut self) -> Result<(), OclError> {
        match self.0.take() {
            Some(e) => e.set_status(CL_COMPLETE),
            None => Ok(()),
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if let Some(e) = self.0.take()
            && let Err(err) = e.set_status(CL_COMPLETE)
        {
            tracing::error!("cannot open the gate of a dropped command: {err}");
        }
    }
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

/// An in-order OpenCL command queue as an xsched hardware queue (Level 1; Level 2 on a CPU
/// device where thread priorities can be restored).
pub struct OclQueue {
    // Declared first: on drop the retired events go before the queue they belong to.
    retired: Arc<Retired>,
    /// The XQueue's completion hook, run by the event callbacks (`hook.rs`).
    hook: Arc<HookSlot>,
    /// The last launched command's event, for `synchronize`.
    last: Mutex<Option<Event>>,
    queue: RawQueue,
    /// The queue's context (a handle, kept as an address: it is only passed back to OpenCL).
    context: usize,
    device: DeviceId,
    caps: Capabilities,
    /// Level 2 by thread priority applies (a CPU device, and the process may undo it).
    holds_by_priority: bool,
    /// Deactivated (counted in the process's census of held queues).
    held: AtomicBool,
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
        let raw_device = isize::from(info) as cl3::types::cl_device_id;
        let device = device::device_id_of(raw_device)?;
        let caps = device::capabilities(device::is_cpu(raw_device));
        let holds_by_priority = caps.max_level >= Level::Deactivate;
        let context: isize =
            cl3::command_queue::get_command_queue_info(raw, cl3::command_queue::CL_QUEUE_CONTEXT)
                .map_err(|c| OclError::call("clGetCommandQueueInfo", c))?
                .into();
        // SAFETY: `raw` is valid by the caller's contract.
        unsafe { cl3::command_queue::retain_command_queue(raw) }
            .map_err(|c| OclError::call("clRetainCommandQueue", c))?;
        if holds_by_priority {
            demote::queue_created();
        }
        Ok(OclQueue {
            retired: Arc::default(),
            hook: Arc::default(),
            last: Mutex::new(None),
            queue: RawQueue(raw),
            context: context as usize,
            device,
            caps,
            holds_by_priority,
            held: AtomicBool::new(false),
        })
    }

    /// The raw queue (still owned by `self`).
    pub fn raw(&self) -> cl_command_queue {
        self.queue.0
    }

    /// Make an enqueue now behind a new gate: `call` is the real enqueue given the wait list to
    /// use (`waits`, the application's events, with the gate after them) and returns the
    /// command's event or the library's status. Returns that status, or the event with the
    /// gated command to submit; `Err` when no gate could be made (nothing was enqueued).
    pub fn enqueue_gated(
        &self,
        waits: &[cl3::types::cl_event],
        call: impl FnOnce(&[cl3::types::cl_event]) -> Result<cl3::types::cl_event, cl3::types::cl_int>,
    ) -> Result<Result<(Event, OclCommand), cl3::types::cl_int>, OclError> {
        let gate = Gate::new(self.context as cl3::types::cl_context)?;
        let mut list = Vec::with_capacity(waits.len() + 1);
        list.extend_from_slice(waits);
        list.push(gate.raw());
        Ok(match call(&list) {
            Err(code) => Err(code),
            Ok(raw) => {
                // SAFETY: the real enqueue handed us one reference to the command's event.
                let event = unsafe { Event::from_raw(raw) };
                let app = event.retained()?;
                Ok((app, OclCommand::Gated { gate, event }))
            }
        })
    }

    /// Launch `cmd` (on this thread, marked as launching: see `hook.rs`).
    fn launch_here(&self, cmd: OclCommand, done: Completion) {
        self.retired.release();
        let event = match cmd {
            OclCommand::Enqueue(enqueue) => match enqueue(self.queue.0) {
                Ok(event) => event,
                Err(code) => return self.fail(done, &OclError::call("clEnqueue*", code)),
            },
            OclCommand::Gated { gate, event } => {
                if let Err(e) = gate.open() {
                    return self.fail(done, &e);
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
        complete_on(event, done, self.retired.clone(), self.hook.clone());
    }

    /// Fail `done` here, inside the launch (the hook's work, if any, is passed on as for any
    /// completion reported inside a launch).
    fn fail(&self, done: Completion, e: &OclError) {
        done.complete(Err(CommandError::Failed(e.to_string())));
        hook::after_completion(&self.hook);
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
        hook::launching(|| self.launch_here(cmd, done));
    }

    /// The event callbacks run the hook after a completion that left it work (`hook.rs`).
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        self.hook.set(hook);
        Ok(())
    }

    /// Threads that take the queue's lock keep their priority under a Level-2 hold of any
    /// CPU-device queue of the process (see `demote.rs`), except OpenCL's callback threads
    /// refilling: they are the device's own threads, which the hold is about, so they are
    /// spared only while their refill runs (`hook::after_completion`).
    fn before_queue_lock(&self) {
        if !hook::refilling() {
            demote::exempt_this_thread();
        }
    }

    /// On a CPU device deactivating demotes the process's threads: what runs then runs on
    /// idle CPU only.
    fn deactivation_only_lowers_priority(&self) -> bool {
        self.holds_by_priority
    }

    /// Level 2 on a CPU device: the process's device threads run on idle CPU only.
    fn deactivate(&self) -> Result<(), HwError> {
        if !self.holds_by_priority {
            return Err(HwError::Unsupported(Level::Deactivate));
        }
        if !self.held.swap(true, Ordering::AcqRel) {
            demote::hold();
        }
        Ok(())
    }

    fn reactivate(&self) -> Result<(), HwError> {
        if !self.holds_by_priority {
            return Err(HwError::Unsupported(Level::Deactivate));
        }
        if self.held.swap(false, Ordering::AcqRel) {
            demote::release();
        }
        Ok(())
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
        if self.holds_by_priority {
            // Restore first: a held queue's last commands must not drain at idle priority.
            demote::queue_dropped(self.held.swap(false, Ordering::AcqRel));
        }
        if let Err(e) = self.synchronize() {
            tracing::warn!("OpenCL queue dropped with a failed command: {e}");
        }
    }
}
