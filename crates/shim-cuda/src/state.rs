//! The shim's process-wide interposer (`xsched-interpose`), keyed by which real stream a handle
//! means, and the streams being captured into a graph. If the runtime or the driver cannot
//! start (a bad `XSCHED_*` value, no usable driver), the shim says so once and forwards every
//! call unchanged.
//!
//! Streams are scheduled on first use (or at creation): a created stream by its handle, the
//! legacy default stream per context, the per-thread default stream per context and thread.
//! A stream that cannot be scheduled (a bad per-queue `XSCHED_*` value, Level 1 only) passes
//! through with one log line; a stream being captured into a graph passes through while it is.
//!
//! Streams that go away without a destroy call are released with what took them: a thread's
//! per-thread default streams when the thread exits, a context's default streams when
//! `cuCtxDestroy` destroys it. Each release drains the XQueue first (every command the
//! application issued runs) and frees its launcher thread and daemon registration. An exiting
//! thread's thread-local guard only hands its number to the shim's reaper thread: draining (and
//! logging) cannot happen inside a thread-local destructor, and the exiting thread need not wait.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, Weak};
use xsched_backend_cuda::{CudaError, CudaStream, sys};
use xsched_core::{CommandId, Hint, Level};
use xsched_interpose::{Interposer, PerProcess};
use xsched_runtime::{HwQueue, QueueOptions, RuntimeError, XQueue};

/// `CU_STREAM_LEGACY`.
const LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`.
const PER_THREAD: usize = 0x2;

/// Which real stream a handle means: (normalised handle, context for the default streams,
/// thread for the per-thread one).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) handle: usize,
    context: usize,
    thread: u64,
}

fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ME: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
    ME.with(|me| *me)
}

/// The calling thread's current context (0 if none).
pub(crate) fn current_context() -> usize {
    let mut context: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver was probed when the shim started; `context` is a valid out-pointer.
    let _ = unsafe { sys::cuCtxGetCurrent(&mut context) };
    context as usize
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream {:#x}", self.handle)
    }
}

impl Key {
    /// Whether this is a per-thread default stream of thread `thread`.
    fn is_per_thread_of(&self, thread: u64) -> bool {
        self.handle == PER_THREAD && self.thread == thread
    }

    /// Whether this is a default stream (legacy or per-thread) of context `context`.
    fn is_default_of(&self, context: usize) -> bool {
        (self.handle == LEGACY || self.handle == PER_THREAD) && self.context == context
    }

    /// The stream `handle` means in a call from this thread (`ptsz`: a per-thread-default-stream
    /// entry point, where NULL is the per-thread stream rather than the legacy one).
    pub(crate) fn of(handle: sys::CUstream, ptsz: bool) -> Key {
        let handle = match handle as usize {
            0 if ptsz => PER_THREAD,
            0 => LEGACY,
            h => h,
        };
        let default = handle == LEGACY || handle == PER_THREAD;
        Key {
            handle,
            context: if default { current_context() } else { 0 },
            thread: if handle == PER_THREAD {
                thread_number()
            } else {
                0
            },
        }
    }
}

/// Why a stream is left unscheduled (logged with its causes).
#[derive(Debug, thiserror::Error)]
enum AdoptError {
    /// The backend cannot wrap the stream.
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The `XSCHED_*` queue options, or the runtime, refuse it.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The device cannot gate commands (Level 1 only).
    #[error("the device has no stream memory operations to gate commands with")]
    NoMemOps,
}

/// Where an event was recorded: the stream's queue (weakly: a destroyed stream must still be
/// drained and released when the application lets it go) and its last command before the
/// record.
type Recorded = (Weak<XQueue<CudaStream>>, CommandId);

/// The interposer (`xsched-interpose`), the streams being captured into a graph, and the
/// threads that exited with per-thread streams.
pub(crate) struct Shim {
    streams: Interposer<Key, CudaStream>,
    capturing: Mutex<HashSet<Key>>,
    /// Per event recorded on a scheduled stream: where it was recorded.
    events: Mutex<HashMap<usize, Recorded>>,
    exited: Mutex<Vec<u64>>,
    reap: Condvar,
    reaper: Once,
}

static SHIM: PerProcess<Option<Shim>> = PerProcess::new();

/// This process's shim (a forked child builds its own: streams its parent used pass through in
/// it until it uses them itself), or `None` when it could not start (then every call is
/// forwarded).
pub(crate) fn shim() -> Option<&'static Shim> {
    SHIM.get(|| {
        xsched_interpose::atfork::register();
        let streams = Interposer::start("CUDA", xsched_backend_cuda::probe)?;
        Some(Shim {
            streams,
            capturing: Mutex::default(),
            events: Mutex::default(),
            exited: Mutex::default(),
            reap: Condvar::new(),
            reaper: Once::new(),
        })
    })?
    .as_ref()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shim {
    /// The scheduled stream behind `key` (scheduling it now if it is new), or `None` if it
    /// passes through.
    pub(crate) fn stream(&'static self, key: Key) -> Option<Arc<XQueue<CudaStream>>> {
        if lock(&self.capturing).contains(&key) {
            return None;
        }
        if let Some(s) = self.streams.get(key) {
            return Some(s);
        }
        if self.streams.passed(key) {
            return None;
        }
        self.adopt(key)
    }

    /// Put a stream under an XQueue, or leave it unscheduled with one log line.
    pub(crate) fn adopt(&'static self, key: Key) -> Option<Arc<XQueue<CudaStream>>> {
        self.adopt_at(key, 0)
    }

    /// As [`adopt`](Self::adopt), `raise` above the process's `XSCHED_PRIORITY` (a stream
    /// created with a CUDA priority: CUDA's lower numbers are more urgent, so CUDA priority
    /// `p` raises by `-p`).
    pub(crate) fn adopt_at(&'static self, key: Key, raise: i32) -> Option<Arc<XQueue<CudaStream>>> {
        if key.handle == PER_THREAD {
            self.start_reaper();
            release_on_thread_exit(key.thread);
        }
        self.streams.adopt(key, |runtime| -> Result<_, AdoptError> {
            let mut options = QueueOptions::from_env()?;
            if raise != 0 {
                let priority = options.hints.priority.saturating_add(raise);
                options = options.with_hint(Hint::Priority(priority))?;
            }
            // SAFETY: the handle is the application's live stream (or a default stream) in the
            // current context; it is forgotten when the application destroys it (`forget`),
            // and the per-thread stream is only ever enqueued on from its own thread
            // (`gate.rs`).
            let hw = unsafe { CudaStream::wrap(key.handle as sys::CUstream) }?;
            if hw.capabilities().max_level < Level::Deactivate {
                return Err(AdoptError::NoMemOps);
            }
            Ok(runtime.create_queue(Arc::new(hw), options)?)
        })
    }

    /// The application destroys the stream: drain and forget its XQueue.
    pub(crate) fn forget(&self, key: Key) {
        lock(&self.capturing).remove(&key);
        // Dropping the last reference drains the XQueue: every command the application issued
        // runs.
        drop(self.streams.forget(key));
    }

    /// The context `context` is being destroyed: drain and forget its default streams (first
    /// those of threads that exited, so each is accounted to its thread; the reaper waits).
    pub(crate) fn forget_context(&self, context: usize) {
        let mut exited = lock(&self.exited);
        self.reap(&mut exited);
        let gone = self.streams.forget_where(|k| k.is_default_of(context));
        if !gone.is_empty() {
            tracing::info!(
                "context {context:#x} destroyed: its {} default stream(s) released",
                gone.len()
            );
        }
    }

    /// Thread `thread` is exiting (from its thread-local destructor: no logging, no waiting).
    fn thread_exited(&self, thread: u64) {
        lock(&self.exited).push(thread);
        self.reap.notify_one();
    }

    /// The reaper thread, started with the first per-thread stream.
    fn start_reaper(&'static self) {
        self.reaper.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("xsched-cuda-reaper".into())
                .spawn(move || {
                    let mut exited = lock(&self.exited);
                    loop {
                        while exited.is_empty() {
                            exited = self
                                .reap
                                .wait(exited)
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                        }
                        self.reap(&mut exited);
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("no reaper thread ({e}): exited threads' streams stay scheduled");
            }
        });
    }

    /// Release the per-thread streams of every thread in `exited` (the list, locked: an exiting
    /// thread waits to add itself until this is done).
    fn reap(&self, exited: &mut Vec<u64>) {
        for thread in exited.drain(..) {
            self.forget_thread(thread);
        }
    }

    /// Thread `thread` exited: drain and forget its per-thread default streams.
    fn forget_thread(&self, thread: u64) {
        let gone = self.streams.forget_where(|k| k.is_per_thread_of(thread));
        if !gone.is_empty() {
            tracing::info!(
                "thread {thread} exited: its {} per-thread stream(s) released",
                gone.len()
            );
        }
    }

    /// The application records `event` on the stream `key` (called before the record reaches
    /// the driver): remember which queue's commands the record follows.
    pub(crate) fn recorded(&'static self, event: usize, key: Key) {
        let at = self
            .stream(key)
            .and_then(|q| q.last_submitted().map(|id| (Arc::downgrade(&q), id)));
        let mut events = lock(&self.events);
        match at {
            Some(at) => events.insert(event, at),
            None => events.remove(&event),
        };
    }

    /// The application makes the stream `key` wait for `event` (called before the wait reaches
    /// the driver). If another scheduled stream recorded it, wait here until that stream's
    /// commands before the record have run. Otherwise the wait would sit in the device's stream
    /// behind gates the XQueue has opened. That stream would then never go idle, and a policy
    /// that suspended the recording stream for it (a lower priority, say) would never resume
    /// it: a deadlock. What the device runs, and in what order, is unchanged; the calling
    /// thread is blocked until then and queues nothing else meanwhile. Under
    /// `XSCHED_SCHEDULER=app`, where the application suspends queues itself, a wait on an event
    /// of a queue it keeps suspended lasts until it resumes that queue.
    pub(crate) fn before_wait(&'static self, event: usize, key: Key) {
        let Some((recorder, last)) = lock(&self.events).get(&event).cloned() else {
            return;
        };
        // A recording stream already released has drained: nothing to wait for.
        let Some(recorder) = recorder.upgrade() else {
            return;
        };
        let same = self
            .streams
            .get(key)
            .is_some_and(|waiter| Arc::ptr_eq(&waiter, &recorder));
        if !same {
            let _ = recorder.wait(last);
        }
    }

    /// The application destroys `event`.
    pub(crate) fn event_destroyed(&self, event: usize) {
        lock(&self.events).remove(&event);
    }

    /// A capture into a graph begins (`true`) or ends on the stream.
    pub(crate) fn set_capturing(&self, key: Key, capturing: bool) {
        let mut set = lock(&self.capturing);
        if capturing {
            if set.insert(key) {
                tracing::info!(
                    "stream {:#x} is captured into a graph: passed through unscheduled",
                    key.handle
                );
            }
        } else {
            set.remove(&key);
        }
    }
}

/// Releases its thread's per-thread default streams when the thread exits (its thread-local
/// destructor). Holds the thread's number: other thread-locals may be gone by then.
struct ReleaseOnExit(u64);

impl Drop for ReleaseOnExit {
    fn drop(&mut self) {
        if let Some(s) = shim() {
            s.thread_exited(self.0);
        }
    }
}

/// Arrange for this thread's per-thread streams to be released when it exits (once per thread).
fn release_on_thread_exit(thread: u64) {
    thread_local!(static GUARD: std::cell::OnceCell<ReleaseOnExit> = const { std::cell::OnceCell::new() });
    // A thread already tearing down its thread-locals cannot register one: nothing to do then.
    let _ = GUARD.try_with(|g| {
        g.get_or_init(|| ReleaseOnExit(thread));
    });
}
