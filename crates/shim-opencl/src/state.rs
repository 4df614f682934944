//! The shim's process-wide interposer (`xsched-interpose`), keyed by the application's
//! `cl_command_queue` handles, and which queues it schedules.

use cl3::command_queue::{
    CL_QUEUE_ON_DEVICE, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, CL_QUEUE_PROPERTIES,
    CL_QUEUE_REFERENCE_COUNT,
};
use cl3::types::{cl_command_queue, cl_ulong};
use std::sync::Arc;
use xsched_backend_opencl::{OclError, OclQueue, cl3};
use xsched_interpose::{Interposer, PerProcess};
use xsched_runtime::{QueueOptions, RuntimeError, XQueue};

/// An application's command queue, by handle address.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct QueueKey(usize);

impl QueueKey {
    fn of(queue: cl_command_queue) -> QueueKey {
        QueueKey(queue as usize)
    }
}

impl std::fmt::Debug for QueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "queue {:#x}", self.0)
    }
}

/// Why a new queue is left unscheduled (logged as the backend or the runtime says it).
#[derive(Debug, thiserror::Error)]
enum AdoptError {
    /// The backend cannot wrap the queue.
    #[error(transparent)]
    Queue(#[from] OclError),
    /// The `XSCHED_*` queue options, or the runtime, refuse it.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The interposer: queues by handle.
pub(crate) type Shim = Interposer<QueueKey, OclQueue>;

static SHIM: PerProcess<Option<Shim>> = PerProcess::new();

/// This process's shim (a forked child builds its own: queues its parent created pass through
/// in it), or `None` when it could not start (then every call is forwarded).
pub(crate) fn shim() -> Option<&'static Shim> {
    SHIM.get(|| {
        xsched_interpose::atfork::register();
        Interposer::start("OpenCL", || Ok::<(), std::convert::Infallible>(()))
    })?
    .as_ref()
}

/// The scheduled queue behind `queue`, if it is one.
pub(crate) fn scheduled(queue: cl_command_queue) -> Option<Arc<XQueue<OclQueue>>> {
    shim()?.get(QueueKey::of(queue))
}

/// Put a newly created queue under an XQueue, or leave it unscheduled with one log line
/// (out-of-order and on-device queues; anything that fails).
pub(crate) fn adopt(s: &Shim, queue: cl_command_queue) {
    let properties: cl_ulong =
        match cl3::command_queue::get_command_queue_info(queue, CL_QUEUE_PROPERTIES) {
            Ok(p) => p.into(),
            Err(code) => {
                tracing::warn!("queue {queue:?} unscheduled: clGetCommandQueueInfo: {code}");
                s.pass(QueueKey::of(queue));
                return;
            }
        };
    if properties & (CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_ON_DEVICE) != 0 {
        tracing::warn!(
            "queue {queue:?} passed through unscheduled: out-of-order or on-device queues are \
             not scheduled"
        );
        s.pass(QueueKey::of(queue));
        return;
    }
    s.adopt(QueueKey::of(queue), |runtime| -> Result<_, AdoptError> {
        // SAFETY: `queue` was just created by the real library and is valid.
        let hw = unsafe { OclQueue::from_raw(queue) }?;
        let options = QueueOptions::from_env()?;
        runtime
            .create_queue(Arc::new(hw), options)
            .map_err(AdoptError::Runtime)
    });
}

/// The application is about to release `queue`: on its last reference, drain and forget the
/// XQueue (its hardware queue holds the other reference, released here too).
pub(crate) fn release(s: &Shim, queue: cl_command_queue) {
    if s.get(QueueKey::of(queue)).is_none() {
        return;
    }
    let count: u32 =
        match cl3::command_queue::get_command_queue_info(queue, CL_QUEUE_REFERENCE_COUNT) {
            Ok(c) => c.into(),
            Err(_) => return,
        };
    if count <= 2 {
        // Dropping the last reference drains the XQueue: every command the application
        // enqueued runs.
        drop(s.forget(QueueKey::of(queue)));
    }
}
