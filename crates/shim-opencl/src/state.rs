//! The shim's process-wide state: one xsched runtime (configured from `XSCHED_*`) and the
//! application's scheduled queues by handle.
//!
//! A preloaded library cannot be handed state by the program it is loaded into, so this is the
//! one global, created on first use. If the runtime cannot start (a bad `XSCHED_*` value), the
//! shim says so once and forwards every call unchanged: the application keeps working.

use cl3::command_queue::{
    CL_QUEUE_CONTEXT, CL_QUEUE_ON_DEVICE, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
    CL_QUEUE_PROPERTIES, CL_QUEUE_REFERENCE_COUNT,
};
use cl3::types::{cl_command_queue, cl_context, cl_ulong};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use xsched_backend_opencl::{OclQueue, cl3};
use xsched_runtime::{HwQueue, QueueOptions, Runtime, XQueue};

/// One scheduled application queue.
pub(crate) struct Scheduled {
    pub(crate) xqueue: XQueue<OclQueue>,
    /// The queue's context, for the gates' user events.
    context: usize,
}

impl Scheduled {
    pub(crate) fn context(&self) -> cl_context {
        self.context as cl_context
    }
}

/// The runtime and the scheduled queues.
pub(crate) struct Shim {
    runtime: Runtime,
    queues: RwLock<HashMap<usize, Arc<Scheduled>>>,
}

static SHIM: OnceLock<Option<Shim>> = OnceLock::new();

/// The shim, or `None` when it could not start (then every call is forwarded).
pub(crate) fn shim() -> Option<&'static Shim> {
    SHIM.get_or_init(|| {
        xsched_runtime::init_logging(false);
        match Runtime::from_env() {
            Ok(runtime) => {
                tracing::info!(
                    "xsched OpenCL shim: scheduler {}",
                    runtime.config().scheduler.name()
                );
                Some(Shim {
                    runtime,
                    queues: RwLock::default(),
                })
            }
            Err(e) => {
                tracing::error!("xsched OpenCL shim disabled, calls go straight to OpenCL: {e}");
                None
            }
        }
    })
    .as_ref()
}

impl Shim {
    /// The scheduled queue behind `queue`, if it is one.
    pub(crate) fn get(&self, queue: cl_command_queue) -> Option<Arc<Scheduled>> {
        self.queues
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(queue as usize))
            .cloned()
    }

    /// Put a newly created queue under an XQueue, or leave it unscheduled with one log line
    /// (out-of-order and on-device queues; anything that fails).
    pub(crate) fn adopt(&self, queue: cl_command_queue) {
        let properties: cl_ulong =
            match cl3::command_queue::get_command_queue_info(queue, CL_QUEUE_PROPERTIES) {
                Ok(p) => p.into(),
                Err(code) => {
                    tracing::warn!("queue {queue:?} unscheduled: clGetCommandQueueInfo: {code}");
                    return;
                }
            };
        if properties & (CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_ON_DEVICE) != 0 {
            tracing::warn!(
                "queue {queue:?} passed through unscheduled: out-of-order or on-device queues \
                 are not scheduled"
            );
            return;
        }
        match self.schedule(queue) {
            Ok(scheduled) => {
                tracing::info!(
                    "queue {queue:?} scheduled as XQueue {} on device {}",
                    scheduled.xqueue.id(),
                    scheduled.xqueue.hw().device().0
                );
                self.queues
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(queue as usize, Arc::new(scheduled));
            }
            Err(e) => tracing::warn!("queue {queue:?} passed through unscheduled: {e}"),
        }
    }

    fn schedule(&self, queue: cl_command_queue) -> Result<Scheduled, String> {
        let context: isize = cl3::command_queue::get_command_queue_info(queue, CL_QUEUE_CONTEXT)
            .map_err(|c| format!("clGetCommandQueueInfo: {c}"))?
            .into();
        // SAFETY: `queue` was just created by the real library and is valid.
        let hw = unsafe { OclQueue::from_raw(queue) }.map_err(|e| e.to_string())?;
        let options = QueueOptions::from_env().map_err(|e| e.to_string())?;
        let xqueue = self
            .runtime
            .create_queue(Arc::new(hw), options)
            .map_err(|e| e.to_string())?;
        Ok(Scheduled {
            xqueue,
            context: context as usize,
        })
    }

    /// The application is about to release `queue`: on its last reference, drain and forget
    /// the XQueue (its hardware queue holds the other reference, released here too).
    pub(crate) fn release(&self, queue: cl_command_queue) {
        if self.get(queue).is_none() {
            return;
        }
        let count: u32 =
            match cl3::command_queue::get_command_queue_info(queue, CL_QUEUE_REFERENCE_COUNT) {
                Ok(c) => c.into(),
                Err(_) => return,
            };
        if count > 2 {
            return;
        }
        let removed = self
            .queues
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(queue as usize));
        // Dropping the last Arc drains the XQueue: every command the application enqueued runs.
        drop(removed);
    }
}
