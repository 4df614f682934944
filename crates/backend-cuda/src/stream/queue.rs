//! The stream as an xsched hardware queue: made on a device's primary context or wrapped
//! around an application's stream, gated where the device has stream memory operations, and
//! drained and stopped when dropped.

use super::command::{CudaCommand, Ticket};
use super::shared::{GATE_DEPTH, State, StreamShared};
use crate::driver::{self, probe};
use crate::error::CudaError;
use crate::event::EventPool;
use crate::gates::Gates;
use crate::word::GateWord;
use cudarc::driver::sys;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use xsched_core::{Capabilities, DeviceId, Level};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue};

/// One CUDA stream as an xsched hardware queue (Level 2 where the device has stream memory
/// operations, else Level 1).
pub struct CudaStream {
    shared: Arc<StreamShared>,
    watcher: Option<JoinHandle<()>>,
    device: DeviceId,
    caps: Capabilities,
}

impl CudaStream {
    /// A new non-blocking stream on device `ordinal`'s primary context (which this makes current
    /// on the calling thread).
    pub fn new(ordinal: i32) -> Result<CudaStream, CudaError> {
        probe()?;
        let mut dev: sys::CUdevice = 0;
        // SAFETY: probed; `dev` is a valid out-pointer.
        CudaError::check("cuDeviceGet", unsafe {
            sys::cuDeviceGet(&mut dev, ordinal)
        })?;
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: probed; `context` is a valid out-pointer; the retained primary context is
        // never released, so it outlives every stream in it.
        let code = unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, dev) };
        CudaError::check("cuDevicePrimaryCtxRetain", code)?;
        // SAFETY: `context` was just retained.
        CudaError::check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(context) })?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: a context is current; `stream` is a valid out-pointer.
        CudaError::check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut stream, flags)
        })?;
        CudaStream::start(stream, context, dev, true)
    }

    /// Schedule the application's stream `raw` (a created stream, the legacy default stream
    /// `0x1` or the per-thread default stream `0x2`) in the calling thread's current context.
    ///
    /// # Safety
    /// `raw` is a valid stream of the current context and stays valid while the result lives.
    /// For the per-thread default stream, only [`CudaStream::enqueue`] on the owning thread may
    /// enqueue (the handle means another stream on other threads), so use
    /// [`CudaCommand::Enqueued`] only.
    pub unsafe fn wrap(raw: sys::CUstream) -> Result<CudaStream, CudaError> {
        probe()?;
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: probed; `context` is a valid out-pointer.
        CudaError::check("cuCtxGetCurrent", unsafe {
            sys::cuCtxGetCurrent(&mut context)
        })?;
        let mut dev: sys::CUdevice = 0;
        // SAFETY: probed; `dev` is a valid out-pointer.
        CudaError::check("cuCtxGetDevice", unsafe { sys::cuCtxGetDevice(&mut dev) })?;
        CudaStream::start(raw, context, dev, false)
    }

    fn start(
        stream: sys::CUstream,
        context: sys::CUcontext,
        dev: sys::CUdevice,
        owned: bool,
    ) -> Result<CudaStream, CudaError> {
        let word = if driver::has_stream_memops(dev)? {
            match GateWord::new().and_then(|word| trial_wait(stream, &word).map(|()| word)) {
                Ok(word) => Some(word),
                Err(e) => {
                    tracing::warn!("stream {stream:?} at Level 1: no gate ({e})");
                    None
                }
            }
        } else {
            None
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(StreamShared {
            stream,
            context,
            owned,
            word,
            state: Mutex::new(State {
                gates: Gates::new(GATE_DEPTH),
                exhausted: false,
                launched: 0,
                completed: 0,
                calling: None,
            }),
            changed: Condvar::new(),
            submit: Mutex::new(()),
            events: EventPool::default(),
            watcher: Mutex::new(Some(tx)),
            hook: Mutex::new(None),
            self_blocked: AtomicBool::new(false),
        });
        let watched = shared.clone();
        let watcher = std::thread::Builder::new()
            .name("xsched-cuda-watch".into())
            .spawn(move || watched.watch(&rx))
            .map_err(|e| CudaError::Unavailable(format!("cannot start a thread: {e}")))?;
        let gated = shared.word.is_some();
        Ok(CudaStream {
            shared,
            watcher: Some(watcher),
            device: driver::device_id(dev),
            caps: driver::capabilities(gated),
        })
    }

    /// The raw stream.
    pub fn raw(&self) -> sys::CUstream {
        self.shared.stream
    }

    /// Enqueue `call` (which enqueues one command on the stream it is given) behind the next
    /// gate, on the calling thread, and return its result with the [`Ticket`] to submit as
    /// [`CudaCommand::Enqueued`]. The call is made whatever its outcome; only a failure to
    /// enqueue the gate or take an event returns an error, before `call` runs.
    pub fn enqueue<R>(
        &self,
        call: impl FnOnce(sys::CUstream) -> R,
    ) -> Result<(R, Ticket), CudaError> {
        self.shared.enqueue(call, false)
    }

    /// Fail `done` inside `launch`.
    fn fail(&self, done: Completion, e: &CudaError) {
        done.complete(Err(CommandError::Failed(e.to_string())));
        self.shared.after_inline_completion();
    }
}

impl HwQueue for CudaStream {
    type Command = CudaCommand;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn device(&self) -> DeviceId {
        self.device
    }

    fn launch(&self, cmd: CudaCommand, done: Completion) {
        let mut ticket = match cmd {
            CudaCommand::Enqueue(enqueue) => {
                if let Err(e) = self.shared.make_current() {
                    return self.fail(done, &e);
                }
                match self.shared.enqueue(enqueue, true) {
                    Ok((Ok(()), ticket)) => ticket,
                    Ok((Err(e), ticket)) => {
                        drop(ticket);
                        return self.fail(done, &e);
                    }
                    Err(e) => return self.fail(done, &e),
                }
            }
            CudaCommand::Enqueued(ticket) => ticket,
        };
        if !Arc::ptr_eq(&ticket.shared, &self.shared) {
            let e = CudaError::Unavailable("a ticket of another stream".into());
            return self.fail(done, &e);
        }
        let (seq, event) = (ticket.seq.take(), ticket.event.take());
        self.shared.launch(seq, event, Some(done));
    }

    /// The watcher runs the hook after a completion that left it work (see the module docs).
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        *self
            .shared
            .hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(hook));
        Ok(())
    }

    /// Waits until every launched command completed (not `cuStreamSynchronize`: commands behind
    /// gates that were not launched yet would never finish).
    fn synchronize(&self) -> Result<(), HwError> {
        let mut state = self.shared.state();
        while state.completed < state.launched {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        Ok(())
    }

    fn deactivate(&self) -> Result<(), HwError> {
        if self.shared.word.is_none() {
            return Err(HwError::Unsupported(Level::Deactivate));
        }
        self.shared.state().gates.set_active(false);
        Ok(())
    }

    fn reactivate(&self) -> Result<(), HwError> {
        if self.shared.word.is_none() {
            return Err(HwError::Unsupported(Level::Deactivate));
        }
        let mut state = self.shared.state();
        state.gates.set_active(true);
        self.shared.pump(&mut state);
        Ok(())
    }
}

/// A wait that is already satisfied (the word is 0): confirms that the stream takes memory waits.
fn trial_wait(stream: sys::CUstream, word: &GateWord) -> Result<(), CudaError> {
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    // SAFETY: `stream` is valid by the constructors' contracts; `word` is live mapped memory.
    let code = unsafe { sys::cuStreamWaitValue32_v2(stream, word.device(), 0, geq) };
    CudaError::check("cuStreamWaitValue32", code)
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        {
            // Whatever was launched must be able to finish.
            let mut state = self.shared.state();
            state.gates.set_active(true);
            self.shared.pump(&mut state);
        }
        if let Err(e) = self.synchronize() {
            tracing::warn!("CUDA stream dropped with a failed command: {e}");
        }
        // The watcher stops: the hook goes back before anything is reported from elsewhere.
        drop(
            self.shared
                .hook
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        drop(
            self.shared
                .watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        if let Some(watcher) = self.watcher.take()
            && watcher.join().is_err()
        {
            tracing::error!("CUDA stream watcher panicked");
        }
    }
}
