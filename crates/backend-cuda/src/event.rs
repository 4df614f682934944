//! Owned CUDA events, pooled per stream: each gated command records one after itself, and the
//! stream's watcher thread waits for it to report the command's completion.

use crate::error::CudaError;
use cudarc::driver::sys;
use std::sync::Mutex;

/// One CUDA event, destroyed when dropped.
#[derive(Debug)]
pub(crate) struct Event(sys::CUevent);

// SAFETY: CUDA events may be recorded, waited for and destroyed from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A new event without timing (cheaper to record) in the current context.
    fn new() -> Result<Event, CudaError> {
        let mut raw: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: `raw` is a valid out-pointer.
        let code = unsafe { sys::cuEventCreate(&mut raw, flags) };
        CudaError::check("cuEventCreate", code)?;
        Ok(Event(raw))
    }

    /// Record the event on `stream` (it completes when the stream reaches it).
    pub(crate) fn record(&self, stream: sys::CUstream) -> Result<(), CudaError> {
        // SAFETY: `self.0` is a live event; `stream` is valid by the stream's contract.
        CudaError::check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.0, stream)
        })
    }

    /// Block until the device reached the event.
    pub(crate) fn wait(&self) -> Result<(), CudaError> {
        // SAFETY: `self.0` is a live event.
        CudaError::check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.0)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: `self` owns the event; it is destroyed once.
        let code = unsafe { sys::cuEventDestroy_v2(self.0) };
        if let Err(e) = CudaError::check("cuEventDestroy", code) {
            tracing::warn!("{e}");
        }
    }
}

/// Finished events, reused for later commands.
#[derive(Default)]
pub(crate) struct EventPool(Mutex<Vec<Event>>);

impl EventPool {
    /// A free event, or a new one (in the current context).
    pub(crate) fn take(&self) -> Result<Event, CudaError> {
        let free = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        free.map_or_else(Event::new, Ok)
    }

    /// Return an event whose command completed.
    pub(crate) fn put(&self, event: Event) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }
}
