//! The hardware queue over one CUDA stream: Level 1 everywhere, Level 2 behind stream memory
//! gates where the device has them.
//!
//! Every command is enqueued on the stream as `[gate] command [event]`: the gate is a
//! `cuStreamWaitValue32` on the stream's host-mapped word (see `gates.rs`), the event tells the
//! stream's watcher thread that the command finished. Launching a command (the XQueue deciding it
//! may run) permits its gate; the host opens permitted gates only a little ahead of the completed
//! commands, so after `deactivate` the queued commands stay behind closed gates and only the
//! running ones finish. A command reaches the stream in one of two ways:
//!
//! - [`CudaCommand::Enqueue`]: launching enqueues it (Rust programs using xsched).
//! - [`CudaCommand::Enqueued`]: it was enqueued earlier behind its gate ([`CudaStream::enqueue`])
//!   and launching permits it. The interception shim uses this: the application's call reaches
//!   the driver at once, so the driver checks it, its status code goes back unchanged and kernel
//!   arguments are captured at the call, while the device still starts the command only when the
//!   XQueue launches it.
//!
//! Without stream memory operations nothing is gated (Level 1): launching enqueues and the event
//! reports completion; [`CudaStream::enqueue`] then runs the call ungated.
//!
//! A call enqueued by [`CudaStream::enqueue`] that blocks its caller until the stream reaches it
//! (a pageable copy, a lazily loaded kernel's first launch, any launch under
//! `CUDA_LAUNCH_BLOCKING=1`) would wait behind its own gate for ever: the XQueue can launch the
//! command only after the call returns. The shim makes the calls it knows of ungated; as a
//! backstop for the rest, the watcher opens the gate of a call that has been in progress for
//! [`SELF_BLOCK_AFTER`] ([`SELF_BLOCK_AFTER_AGAIN`] once the stream has had one) once every gate
//! before it is open and it is within [`GATE_DEPTH`] of the
//! completed commands (so nothing the XQueue holds runs early, and a deactivated stream opens
//! nothing), and warns once per stream. Such a command then runs at once, in stream order: at
//! Level 1 (a suspended queue whose stream stays active), even while its queue is suspended,
//! as the application's call demands. (A [`CudaCommand::Enqueue`] command's gate is permitted
//! before its function runs, as the XQueue is launching it; that function must still not block,
//! see [`EnqueueFn`].)
//!
//! The watcher also runs the XQueue's completion hook: after reporting a completion
//! that left the hook work (a synchronization point), it refills the queue itself, so the
//! launcher thread is not woken for it. The watcher is awake at that moment anyway (it waits for
//! every command's event), and unlike a host function (`cuLaunchHostFunc`) it may call CUDA.

use crate::driver::{self, probe};
use crate::error::CudaError;
use crate::event::{Event, EventPool};
use crate::gates::Gates;
use crate::word::GateWord;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use cudarc::driver::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xsched_core::{Capabilities, DeviceId, Level};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue};

/// How many gates may be open beyond the last completed command: the running command and the
/// next one, so the device never waits for the host between commands.
pub const GATE_DEPTH: u32 = 2;

/// How long a call enqueued behind its gate may be in progress before the watcher takes it to be
/// waiting for its own gate and opens it (see the module docs). An enqueue returns in
/// microseconds; a call that blocks waits for the stream at least.
pub const SELF_BLOCK_AFTER: Duration = Duration::from_millis(20);

/// The same once the stream has had such a call: a program that makes one tends to make many
/// (every launch, under `CUDA_LAUNCH_BLOCKING=1`), and each then waits this long instead.
pub const SELF_BLOCK_AFTER_AGAIN: Duration = Duration::from_millis(2);

/// How often an idle watcher looks for such a call: every [`SELF_BLOCK_AFTER`], and every half of
/// [`SELF_BLOCK_AFTER_AGAIN`] once the stream has had one.
fn self_block_poll(seen: bool) -> Duration {
    if seen {
        SELF_BLOCK_AFTER_AGAIN / 2
    } else {
        SELF_BLOCK_AFTER
    }
}

/// Enqueues one command on the raw stream. It may run on the stream's watcher thread (a refill
/// after a synchronization point, see the module docs), so it must not block: no
/// `cuStreamSynchronize`, `cuCtxSynchronize`, `cuEventSynchronize` or other wait, which would
/// stall the completions of every command behind it (a wait for this stream's own work would
/// never return).
pub type EnqueueFn = Box<dyn FnOnce(sys::CUstream) -> Result<(), CudaError> + Send>;

/// What a [`CudaStream`] runs.
pub enum CudaCommand {
    /// Launching calls the function, which enqueues on the stream (behind the stream's gate).
    Enqueue(EnqueueFn),
    /// Already enqueued behind its gate by [`CudaStream::enqueue`]; launching permits it.
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
    shared: Arc<StreamShared>,
    seq: Option<u32>,
    event: Option<Event>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.seq.is_some() || self.event.is_some() {
            let (seq, event) = (self.seq.take(), self.event.take());
            self.shared.launch(seq, event, None);
        }
    }
}

/// Work the watcher waits for, in launch order.
struct Watch {
    seq: Option<u32>,
    event: Option<Event>,
    done: Option<Completion>,
}

struct State {
    gates: Gates,
    /// The gate word ran out: from then on commands are enqueued ungated.
    exhausted: bool,
    launched: u64,
    completed: u64,
    /// The gated call in progress in `enqueue` (its gate, and since when).
    calling: Option<(u32, Instant)>,
}

struct StreamShared {
    stream: sys::CUstream,
    /// The context the stream belongs to (made current on xsched's own threads).
    context: sys::CUcontext,
    /// Destroy the stream when dropped (streams the backend created).
    owned: bool,
    word: Option<GateWord>,
    state: Mutex<State>,
    changed: Condvar,
    /// Serialises gate, command and event of one enqueue against other enqueues.
    submit: Mutex<()>,
    events: EventPool,
    watcher: Mutex<Option<Sender<Watch>>>,
    /// The XQueue's completion hook, run by the watcher (given back when the stream drops).
    hook: Mutex<Option<Arc<CompletionHook>>>,
    /// A call was found waiting behind its own gate (warned once; later ones are looked for
    /// sooner).
    self_blocked: AtomicBool,
}

thread_local! {
    /// This thread is a stream's watcher (it runs the hook again after its own refill).
    static WATCHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

// SAFETY: CUDA streams and contexts may be used from any thread; the raw handles are only passed
// to the driver. (The per-thread default stream is the exception: see `CudaStream::wrap`.)
unsafe impl Send for StreamShared {}
// SAFETY: as above; the mutable state is behind mutexes.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Open whatever gates may open now.
    fn pump(&self, state: &mut State) {
        if let (Some(word), Some(value)) = (&self.word, state.gates.open()) {
            word.store(value);
        }
    }

    /// Make the stream's context current on an xsched thread (never on the application's).
    fn make_current(&self) -> Result<(), CudaError> {
        if self.context.is_null() {
            return Ok(());
        }
        // SAFETY: `context` is the live context the stream was created in.
        CudaError::check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context)
        })
    }

    /// Enqueue `[gate] call [event]` on the calling thread; `launching` when the XQueue launches
    /// the command now (its gate is permitted before the call, so it never waits for itself).
    fn enqueue<R>(
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
    fn launch(&self, seq: Option<u32>, event: Option<Event>, done: Option<Completion>) {
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
    fn finish(&self, seq: Option<u32>) {
        let mut state = self.state();
        state.completed += 1;
        if let Some(seq) = seq {
            state.gates.complete(seq);
        }
        self.pump(&mut state);
        self.changed.notify_all();
    }

    /// The completion hook, if it has work now.
    fn due_hook(&self) -> Option<Arc<CompletionHook>> {
        self.hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .filter(|h| h.is_due())
    }

    /// A completion was reported inside `launch` (a failed command): on the watcher, its loop
    /// runs the hook next; elsewhere the launcher thread takes what is due.
    fn after_inline_completion(&self) {
        if !WATCHER.get()
            && let Some(hook) = self.due_hook()
        {
            hook.hand_over();
        }
    }

    /// The watcher: waits for each launched command's event in order, reports it, and runs the
    /// completion hook when the completion left it work (out of every lock of the stream).
    fn watch(&self, rx: &Receiver<Watch>) {
        WATCHER.set(true);
        if let Err(e) = self.make_current() {
            tracing::warn!("stream watcher: {e}");
        }
        loop {
            let poll = self_block_poll(self.self_blocked.load(Ordering::Relaxed));
            let Watch { seq, event, done } = match rx.recv_timeout(poll) {
                Ok(watch) => watch,
                Err(RecvTimeoutError::Timeout) => {
                    self.release_self_blocked();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let result = event.as_ref().map_or(Ok(()), Event::wait);
            if let Some(event) = event {
                self.events.put(event);
            }
            self.finish(seq);
            if let Some(done) = done {
                done.complete(result.map_err(|e| CommandError::Failed(e.to_string())));
            }
            // A refill's own launches may fail inline and leave more for the hook.
            while let Some(hook) = self.due_hook() {
                hook.run();
            }
            self.release_self_blocked();
        }
    }

    /// Open the gate of a call that waits behind it (see the module docs).
    fn release_self_blocked(&self) {
        let mut state = self.state();
        let Some((seq, since)) = state.calling else {
            return;
        };
        let seen = self.self_blocked.load(Ordering::Relaxed);
        let after = if seen {
            SELF_BLOCK_AFTER_AGAIN
        } else {
            SELF_BLOCK_AFTER
        };
        if since.elapsed() < after {
            return;
        }
        let (Some(word), Some(value)) = (&self.word, state.gates.release_blocked(seq)) else {
            return;
        };
        word.store(value);
        if !seen {
            self.self_blocked.store(true, Ordering::Relaxed);
            tracing::warn!(
                "stream {:?}: a call waited {} ms behind its own gate (it blocks until the stream \
                 reaches it); opened, it runs unscheduled, as will any such call on this stream \
                 (after {} ms from now on)",
                self.stream,
                since.elapsed().as_millis(),
                SELF_BLOCK_AFTER_AGAIN.as_millis()
            );
        }
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
