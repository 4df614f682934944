//! How a command gets into the stream and is let through: `[gate] call [event]` put on the
//! stream under one lock, the gate permitted when the XQueue launches the command, and the
//! gates opened a little further as each command completes.

use super::command::Ticket;
use super::shared::{StreamShared, Watch};
use crate::error::CudaError;
use crate::event::Event;
use cudarc::driver::sys;
use std::sync::Arc;
use std::time::Instant;
use xsched_runtime::Completion;

impl StreamShared {
    /// Enqueue `[gate] call [event]` on the calling thread; `launching` when the XQueue launches
    /// the command now (its gate is permitted before the call, so it never waits for itself).
    pub(super) fn enqueue<R>(
        self: &Arc<Self>,
        call: impl FnOnce(sys::CUstream) -> R,
        launching: bool,
    ) -> Result<(R, Ticket), CudaError> {
        let _order = self
            .submit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let event = self.events.take()?;
        let seq = self.gate(launching)?;
        let result = call(self.stream);
        if seq.is_some() && !launching {
            self.state().calling = None;
        }
        let event = match event.record(self.stream) {
            Ok(()) => Some(event),
            Err(e) => {
                tracing::warn!("{e}: the command runs unobserved");
                None
            }
        };
        let ticket = Ticket {
            shared: self.clone(),
            seq,
            event,
        };
        Ok((result, ticket))
    }

    /// Put the next gate into the stream, permitted at once when `launching`, else marked as
    /// the call in progress behind it; `None` when the stream is not gated.
    fn gate(&self, launching: bool) -> Result<Option<u32>, CudaError> {
        let Some(word) = &self.word else {
            return Ok(None);
        };
        let seq = {
            let mut state = self.state();
            match state.gates.assign() {
                Some(seq) => {
                    if launching {
                        state.gates.permit(seq);
                        self.pump(&mut state);
                    } else {
                        // The call behind this gate is made next (`enqueue`).
                        state.calling = Some((seq, Instant::now()));
                    }
                    seq
                }
                None => {
                    if !state.exhausted {
                        state.exhausted = true;
                        tracing::warn!("stream {:?}: gate word used up, ungated", self.stream);
                    }
                    return Ok(None);
                }
            }
        };
        let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: `stream` is valid by the stream's contract; `word` is mapped device memory
        // that outlives every gate (see `Drop for StreamShared`).
        let code = unsafe { sys::cuStreamWaitValue32_v2(self.stream, word.device(), seq, geq) };
        if let Err(e) = CudaError::check("cuStreamWaitValue32", code) {
            self.state().calling = None;
            return Err(e);
        }
        Ok(Some(seq))
    }

    /// The XQueue launched a command (or its ticket was dropped): permit its gate and watch it.
    pub(super) fn launch(&self, seq: Option<u32>, event: Option<Event>, done: Option<Completion>) {
        {
            let mut state = self.state();
            state.launched += 1;
            if let Some(seq) = seq {
                state.gates.permit(seq);
                self.pump(&mut state);
            }
        }
        let watch = Watch { seq, event, done };
        let sent = match &*self
            .watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(tx) => tx.send(watch).map_err(|e| e.into_inner()),
            None => Err(watch),
        };
        if let Err(watch) = sent {
            // The stream is being dropped: nothing watches any more; count it done.
            self.finish(watch.seq);
        }
    }

    /// Record a completion: open the next gates and wake `synchronize`.
    pub(super) fn finish(&self, seq: Option<u32>) {
        let mut state = self.state();
        state.completed += 1;
        if let Some(seq) = seq {
            state.gates.complete(seq);
        }
        self.pump(&mut state);
        self.changed.notify_all();
    }
}
