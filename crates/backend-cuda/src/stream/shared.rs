//! The state one stream's handle, tickets, enqueues and watcher share: the gate word and gate
//! bookkeeping, the launched and completed counts, the watcher's channel and the completion
//! hook, and the gating constants.

use crate::error::CudaError;
use crate::event::{Event, EventPool};
use crate::gates::Gates;
use crate::word::GateWord;
use crossbeam_channel::Sender;
use cudarc::driver::sys;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use xsched_runtime::{Completion, CompletionHook};

/// How many gates may be open beyond the last completed command: the running command and the
/// next one, so the device never waits for the host between commands.
pub const GATE_DEPTH: u32 = 2;

/// How long a call enqueued behind its gate may be in progress before the watcher takes it to be
/// waiting for its own gate and opens it (see the module docs of `stream`). An enqueue returns in
/// microseconds; a call that blocks waits for the stream at least.
pub const SELF_BLOCK_AFTER: Duration = Duration::from_millis(20);

/// The same once the stream has had such a call: a program that makes one tends to make many
/// (every launch, under `CUDA_LAUNCH_BLOCKING=1`), and each then waits this long instead.
pub const SELF_BLOCK_AFTER_AGAIN: Duration = Duration::from_millis(2);

/// Work the watcher waits for, in launch order.
pub(super) struct Watch {
    pub(super) seq: Option<u32>,
    pub(super) event: Option<Event>,
    pub(super) done: Option<Completion>,
}

pub(super) struct State {
    pub(super) gates: Gates,
    /// The gate word ran out: from then on commands are enqueued ungated.
    pub(super) exhausted: bool,
    pub(super) launched: u64,
    pub(super) completed: u64,
    /// The gated call in progress in `enqueue` (its gate, and since when).
    pub(super) calling: Option<(u32, Instant)>,
}

pub(super) struct StreamShared {
    pub(super) stream: sys::CUstream,
    /// The context the stream belongs to (made current on xsched's own threads).
    pub(super) context: sys::CUcontext,
    /// Destroy the stream when dropped (streams the backend created).
    pub(super) owned: bool,
    pub(super) word: Option<GateWord>,
    pub(super) state: Mutex<State>,
    pub(super) changed: Condvar,
    /// Serialises gate, command and event of one enqueue against other enqueues.
    pub(super) submit: Mutex<()>,
    pub(super) events: EventPool,
    pub(super) watcher: Mutex<Option<Sender<Watch>>>,
    /// The XQueue's completion hook, run by the watcher (given back when the stream drops).
    pub(super) hook: Mutex<Option<Arc<CompletionHook>>>,
    /// A call was found waiting behind its own gate (warned once; later ones are looked for
    /// sooner).
    pub(super) self_blocked: AtomicBool,
}

thread_local! {
    /// This thread is a stream's watcher (it runs the hook again after its own refill).
    pub(super) static WATCHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

// SAFETY: CUDA streams and contexts may be used from any thread; the raw handles are only passed
// to the driver. (The per-thread default stream is the exception: see `CudaStream::wrap`.)
unsafe impl Send for StreamShared {}
// SAFETY: as above; the mutable state is behind mutexes.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Open whatever gates may open now.
    pub(super) fn pump(&self, state: &mut State) {
        if let (Some(word), Some(value)) = (&self.word, state.gates.open()) {
            word.store(value);
        }
    }

    /// Make the stream's context current on an xsched thread (never on the application's).
    pub(super) fn make_current(&self) -> Result<(), CudaError> {
        if self.context.is_null() {
            return Ok(());
        }
        // SAFETY: `context` is the live context the stream was created in.
        CudaError::check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context)
        })
    }
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        let pending = {
            let state = self.state();
            state.completed < state.launched
        };
        if let Some(word) = self.word.take() {
            // Whatever still waits in the stream may run now.
            word.store(u32::MAX);
            if pending || !self.owned {
                // The device may still read the word (a command never launched, or an
                // application stream that lives on): keep its 4 bytes rather than risk it.
                word.leak();
            } else {
                drop(word);
            }
        }
        if self.owned {
            // SAFETY: the backend created the stream and destroys it once; queued work completes
            // first, as the driver guarantees.
            let code = unsafe { sys::cuStreamDestroy_v2(self.stream) };
            if let Err(e) = CudaError::check("cuStreamDestroy", code) {
                tracing::warn!("{e}");
            }
        }
    }
}
