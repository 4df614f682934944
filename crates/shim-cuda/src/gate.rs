//! How an intercepted call becomes an XQueue command.
//!
//! The application's call is made on its stream at once, behind a gate the XQueue opens when it
//! launches the command (`CudaStream::enqueue`): the driver checks the call and its status goes
//! back unchanged, kernel arguments are captured at the call as CUDA does, and the device starts
//! the command only when the XQueue launches it. Calls the shim does not intercept still run in
//! stream order after the gated ones.

use crate::real::Status;
use crate::state::{Key, shim};
use xsched_backend_cuda::{CudaCommand, sys};
use xsched_interpose::{gated, guard};

/// Make `real` (the application's call, unchanged) on `stream` through its XQueue if the stream
/// is scheduled, else forward it. `stream` is `None` when the call names no readable stream
/// (the driver then reports the error).
pub(crate) fn submit(
    stream: Option<sys::CUstream>,
    ptsz: bool,
    real: &dyn Fn() -> Status,
) -> Status {
    guard::call(
        "CUDA",
        |real| {
            let scheduled = stream.and_then(|h| shim().and_then(|s| s.stream(Key::of(h, ptsz))));
            let Some(xqueue) = scheduled else {
                return real();
            };
            let made = xqueue
                .hw()
                .enqueue(|_| real())
                .map(|(status, ticket)| (status, CudaCommand::Enqueued(ticket)));
            gated::submit(&xqueue, made, real)
        },
        real,
    )
}
