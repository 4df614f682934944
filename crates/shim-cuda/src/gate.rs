//! How an intercepted call becomes an XQueue command.
//!
//! The application's call is made on its stream at once, behind a gate the XQueue opens when it
//! launches the command (`CudaStream::enqueue`): the driver checks the call and its status goes
//! back unchanged, kernel arguments are captured at the call as CUDA does, and the device starts
//! the command only when the XQueue launches it. Calls the shim does not intercept still run in
//! stream order after the gated ones. A call that may block its caller until its stream reaches
//! it must not wait behind its own gate, which opens only after the call returns: its
//! [`Ungated`] rule makes such a call without a gate (`pageable.rs`, `first_launch.rs`, which
//! also lets every launch through under `CUDA_LAUNCH_BLOCKING=1`). A call that blocks and has no
//! rule (one the shim does not know to block) is let through by the backend: the stream's
//! watcher opens the gate of a call still in progress after
//! `xsched_backend_cuda::SELF_BLOCK_AFTER` once every gate before it is open.

use crate::real::Status;
use crate::state::{Key, shim};
use xsched_backend_cuda::{CudaCommand, sys};
use xsched_interpose::{gated, guard};

/// For a call on a scheduled stream: make it ungated (the `&dyn Fn` makes the real call) and
/// return its status, or return `None` to have it gated.
pub(crate) type Ungated<'a> = &'a dyn Fn(&dyn Fn() -> Status) -> Option<Status>;

/// The rule of a call that is always gated.
pub(crate) fn always_gated(_: &dyn Fn() -> Status) -> Option<Status> {
    None
}

/// Make `real` (the application's call, unchanged) on `stream` through its XQueue if the stream
/// is scheduled and `ungated` does not make it itself, else forward it. `stream` is `None` when
/// the call names no readable stream (the driver then reports the error).
pub(crate) fn submit(
    stream: Option<sys::CUstream>,
    ptsz: bool,
    real: &dyn Fn() -> Status,
    ungated: Ungated,
) -> Status {
    guard::call(
        "CUDA",
        |real| {
            let key = stream.map(|h| Key::of(h, ptsz));
            let scheduled = key.and_then(|k| shim().and_then(|s| s.stream(k)));
            let Some(xqueue) = scheduled else {
                return real();
            };
            if let Some(status) = ungated(real) {
                return status;
            }
            let made = xqueue
                .hw()
                .enqueue(|_| real())
                .map(|(status, ticket)| (status, CudaCommand::Enqueued(ticket)));
            gated::submit(&xqueue, made, real)
        },
        real,
    )
}
