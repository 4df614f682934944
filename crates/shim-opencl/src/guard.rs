//! No panic may unwind into the application: every exported function runs its xsched part
//! under `catch_unwind`, and on an internal failure the call goes straight to OpenCL.

use crate::gate::{self, Call, Real};
use cl3::types::cl_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use xsched_backend_opencl::cl3;

/// Enqueue through xsched; after an internal panic (nothing was enqueued yet: see
/// `gate::enqueue`), forward the call unchanged.
///
/// # Safety
/// As [`gate::enqueue`].
pub(crate) unsafe fn enqueue(call: &Call, real: Real<'_>) -> cl_int {
    // SAFETY: the caller's contract is `gate::enqueue`'s.
    let scheduled = catch_unwind(AssertUnwindSafe(|| unsafe { gate::enqueue(call, real) }));
    scheduled.unwrap_or_else(|_| {
        tracing::error!("internal panic in the OpenCL shim: call forwarded");
        // SAFETY: as above.
        unsafe { gate::forward(call, real) }
    })
}

/// Run an xsched-side step whose failure must not affect the application.
pub(crate) fn quietly(what: &str, step: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(step)).is_err() {
        tracing::error!("internal panic in the OpenCL shim while {what}; ignored");
    }
}
