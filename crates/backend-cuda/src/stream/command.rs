//! What a stream runs: a command to enqueue when launched, or the ticket of one enqueued
//! earlier behind its gate.

use super::shared::StreamShared;
use crate::error::CudaError;
use crate::event::Event;
use cudarc::driver::sys;
use std::sync::Arc;

/// Enqueues one command on the raw stream. It may run on the stream's watcher thread (a refill
/// after a synchronization point, see the module docs of `stream`), so it must not block: no
/// `cuStreamSynchronize`, `cuCtxSynchronize`, `cuEventSynchronize` or other wait, which would
/// stall the completions of every command behind it (a wait for this stream's own work would
/// never return).
pub type EnqueueFn = Box<dyn FnOnce(sys::CUstream) -> Result<(), CudaError> + Send>;

/// What a [`CudaStream`](super::CudaStream) runs.
pub enum CudaCommand {
    /// Launching calls the function, which enqueues on the stream (behind the stream's gate).
    Enqueue(EnqueueFn),
    /// Already enqueued behind its gate by [`CudaStream::enqueue`](super::CudaStream::enqueue);
    /// launching permits it.
    Enqueued(Ticket),
}

impl std::fmt::Debug for CudaCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CudaCommand::Enqueue(_) => f.write_str("Enqueue"),
            CudaCommand::Enqueued(t) => write!(f, "Enqueued({:?})", t.seq),
        }
    }
}

/// A command enqueued behind a gate, not yet launched. Dropping it unlaunched still lets the
/// command run (it is in the stream already), unobserved.
pub struct Ticket {
    pub(super) shared: Arc<StreamShared>,
    pub(super) seq: Option<u32>,
    pub(super) event: Option<Event>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.seq.is_some() || self.event.is_some() {
            let (seq, event) = (self.seq.take(), self.event.take());
            self.shared.launch(seq, event, None);
        }
    }
}
