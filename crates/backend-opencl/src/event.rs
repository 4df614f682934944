//! Owned OpenCL events, and the callback that turns an event's completion into an xsched
//! [`Completion`].
//!
//! The OpenCL runtime calls event callbacks on its own threads. The callback reports the
//! completion, runs the queue's completion hook if that completion left it work (`hook.rs`),
//! and hands the event back to its queue instead of releasing it there: the queue releases
//! finished events on its next launch (or when dropped). That launch may itself run in a
//! callback (a refill); releasing other, finished events there is allowed by OpenCL and checked
//! on POCL. The refill's launch also replaces the queue's `last` event, which may be the very
//! event whose callback is running, and so releases one reference to it there: safe, because
//! the callback's `Watch` holds a reference of its own, which it retires when it is done.

use crate::error::OclError;
use crate::hook::{self, HookSlot};
use cl3::event::CL_COMPLETE;
use cl3::types::{cl_context, cl_event, cl_int};
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use xsched_runtime::{CommandError, Completion};

/// One reference to an OpenCL event, released when dropped.
#[derive(Debug)]
pub struct Event(cl_event);

// SAFETY: OpenCL event handles may be used from any thread (the OpenCL API is thread-safe except
// for clSetKernelArg and clSetKernelExecInfo on one kernel, which do not involve events).
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only allows thread-safe OpenCL calls.
unsafe impl Sync for Event {}

impl Event {
    /// Take ownership of one reference to `raw`.
    ///
    /// # Safety
    /// `raw` is a valid event and the caller gives up one reference to it.
    pub unsafe fn from_raw(raw: cl_event) -> Event {
        Event(raw)
    }

    /// A new user event on `context` (status `CL_SUBMITTED` until [`Event::set_status`]).
    pub fn user(context: cl_context) -> Result<Event, OclError> {
        cl3::event::create_user_event(context)
            .map(Event)
            .map_err(|c| OclError::call("clCreateUserEvent", c))
    }

    /// The raw handle (still owned by `self`).
    pub fn raw(&self) -> cl_event {
        self.0
    }

    /// Another reference to the same event.
    pub fn retained(&self) -> Result<Event, OclError> {
        // SAFETY: `self.0` is a valid event while `self` lives.
        unsafe { cl3::event::retain_event(self.0) }
            .map_err(|c| OclError::call("clRetainEvent", c))?;
        Ok(Event(self.0))
    }

    /// Give up ownership without releasing (the caller now owns this reference).
    pub fn into_raw(self) -> cl_event {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }

    /// Complete a user event (`CL_COMPLETE`) or fail it (a negative status).
    pub fn set_status(&self, status: cl_int) -> Result<(), OclError> {
        cl3::event::set_user_event_status(self.0, status)
            .map_err(|c| OclError::call("clSetUserEventStatus", c))
    }

    /// Block until the event completed.
    pub fn wait(&self) -> Result<(), OclError> {
        cl3::event::wait_for_events(&[self.0]).map_err(|c| OclError::call("clWaitForEvents", c))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference to a valid event.
        if let Err(code) = unsafe { cl3::event::release_event(self.0) } {
            tracing::warn!("{}", OclError::call("clReleaseEvent", code));
        }
    }
}

/// Finished events waiting to be released outside the runtime's callback threads.
#[derive(Default)]
pub(crate) struct Retired(Mutex<Vec<Event>>);

impl Retired {
    fn push(&self, event: Event) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }

    /// Release every retired event.
    pub(crate) fn release(&self) {
        let events = std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        drop(events);
    }
}

/// What a command's event callback needs: its completion, its event, and its queue's
/// finished events and completion hook.
struct Watch {
    done: Completion,
    event: Event,
    retired: Arc<Retired>,
    hook: Arc<HookSlot>,
}

/// Complete `done` when `event` completes (with `CommandError::Failed` carrying the status if it
/// ends in error), then run the queue's completion `hook` if due. If the callback cannot be
/// registered, `done` fails at once and the queue gives its hook back (the launcher thread
/// refills it from then on).
pub(crate) fn complete_on(
    event: Event,
    done: Completion,
    retired: Arc<Retired>,
    hook: Arc<HookSlot>,
) {
    let raw = event.raw();
    let watch = Box::into_raw(Box::new(Watch {
        done,
        event,
        retired,
        hook,
    }));
    if let Err(code) = cl3::event::set_event_callback(raw, CL_COMPLETE, on_complete, watch.cast()) {
        // SAFETY: registration failed, so the callback will never run and `watch` (from
        // `Box::into_raw` above) is still ours.
        let watch = unsafe { Box::from_raw(watch) };
        let e = OclError::call("clSetEventCallback", code);
        watch.hook.give_back(&e);
        watch
            .done
            .complete(Err(CommandError::Failed(e.to_string())));
    }
}

extern "C" fn on_complete(_event: cl_event, status: cl_int, data: *mut c_void) {
    // No panic may unwind into the OpenCL runtime's thread.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the `Box<Watch>` leaked by `complete_on`; OpenCL calls a
        // CL_COMPLETE callback exactly once, so it is reclaimed exactly once.
        let watch = unsafe { Box::from_raw(data.cast::<Watch>()) };
        let result = if status == CL_COMPLETE {
            Ok(())
        } else {
            Err(CommandError::Failed(format!(
                "the OpenCL command ended with status {} ({status})",
                cl3::error_codes::error_text(status)
            )))
        };
        watch.done.complete(result);
        // Before the event is retired: the refill's launches release retired events, and
        // this one's callback is still running.
        hook::after_completion(&watch.hook);
        watch.retired.push(watch.event);
    }));
}
