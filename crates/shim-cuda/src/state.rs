//! The shim's process-wide interposer (`xsched-interpose`), keyed by which real stream a handle
//! means, and the streams being captured into a graph. If the runtime or the driver cannot
//! start (a bad `XSCHED_*` value, no usable driver), the shim says so once and forwards every
//! call unchanged.
//!
//! Streams are scheduled on first use (or at creation): a created stream by its handle, the
//! legacy default stream per context, the per-thread default stream per context and thread.
//! A stream that cannot be scheduled (a bad per-queue `XSCHED_*` value, Level 1 only) passes
//! through with one log line; a stream being captured into a graph passes through while it is.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use xsched_backend_cuda::{CudaStream, sys};
use xsched_core::Level;
use xsched_interpose::Interposer;
use xsched_runtime::{HwQueue, QueueOptions, XQueue};

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

fn current_context() -> usize {
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

/// The interposer (`xsched-interpose`), and the streams being captured into a graph.
pub(crate) struct Shim {
    streams: Interposer<Key, CudaStream>,
    capturing: Mutex<HashSet<Key>>,
}

static SHIM: OnceLock<Option<Shim>> = OnceLock::new();

/// The shim, or `None` when it could not start (then every call is forwarded).
pub(crate) fn shim() -> Option<&'static Shim> {
    SHIM.get_or_init(|| {
        let streams = Interposer::start("CUDA", || {
            xsched_backend_cuda::probe().map_err(|e| e.to_string())
        })?;
        Some(Shim {
            streams,
            capturing: Mutex::default(),
        })
    })
    .as_ref()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shim {
    /// The scheduled stream behind `key` (scheduling it now if it is new), or `None` if it
    /// passes through.
    pub(crate) fn stream(&self, key: Key) -> Option<Arc<XQueue<CudaStream>>> {
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
    pub(crate) fn adopt(&self, key: Key) -> Option<Arc<XQueue<CudaStream>>> {
        self.streams.adopt(key, |runtime| {
            let options = QueueOptions::from_env().map_err(|e| e.to_string())?;
            // SAFETY: the handle is the application's live stream (or a default stream) in the
            // current context; it is forgotten when the application destroys it (`forget`),
            // and the per-thread stream is only ever enqueued on from its own thread
            // (`gate.rs`).
            let hw = unsafe { CudaStream::wrap(key.handle as sys::CUstream) }
                .map_err(|e| e.to_string())?;
            if hw.capabilities().max_level < Level::Deactivate {
                return Err(
                    "the device has no stream memory operations to gate commands with".into(),
                );
            }
            runtime
                .create_queue(Arc::new(hw), options)
                .map_err(|e| e.to_string())
        })
    }

    /// The application destroys the stream: drain and forget its XQueue.
    pub(crate) fn forget(&self, key: Key) {
        lock(&self.capturing).remove(&key);
        // Dropping the last reference drains the XQueue: every command the application issued
        // runs.
        drop(self.streams.forget(key));
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
