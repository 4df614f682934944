//! # xsched C API
//!
//! C and C++ programs (and the interception shims) use xsched through these functions; the
//! header `include/xsched.h` is generated from this crate by cbindgen. Every function returns
//! an [`XschedStatus`]; none aborts or unwinds into C: a Rust panic is caught at the boundary
//! and reported as `XSCHED_STATUS_PANIC`. [`xsched_last_error`] gives the message of the
//! calling thread's last failure.
//!
//! Handles are opaque pointers created by `*_create` functions and released by the matching
//! `*_destroy`. Release queues before their device; destroying a queue drains it (every
//! submitted command runs) unless [`xsched_queue_cancel_pending`] was called first.

mod ffi;
mod kernel;
mod queue;
mod runtime;
mod status;

pub use kernel::{
    XschedKernel, xsched_kernel_checksum, xsched_kernel_destroy, xsched_kernel_matmul,
    xsched_kernel_saxpy, xsched_kernel_spin,
};
pub use queue::{
    XschedCallback, XschedQueue, XschedQueueState, xsched_queue_cancel_pending,
    xsched_queue_create, xsched_queue_destroy, xsched_queue_query, xsched_queue_resume,
    xsched_queue_set_deadline_us, xsched_queue_set_launch_config, xsched_queue_set_laxity_us,
    xsched_queue_set_level, xsched_queue_set_priority, xsched_queue_set_share,
    xsched_queue_set_timeslice_us, xsched_queue_submit_callback, xsched_queue_submit_kernel,
    xsched_queue_suspend, xsched_queue_wait, xsched_queue_wait_all,
};
pub use runtime::{
    XschedDevice, XschedRuntime, xsched_device_create_cpu, xsched_device_destroy,
    xsched_runtime_create, xsched_runtime_create_with, xsched_runtime_destroy,
};
pub use status::{XschedStatus, xsched_last_error, xsched_status_name};
