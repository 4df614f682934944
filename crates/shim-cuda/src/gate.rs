//! How an intercepted call becomes an XQueue command.
//!
//! The application's call is made on its stream at once, behind a gate the XQueue opens when it
//! launches the command (`CudaStream::enqueue`): the driver checks the call and its status goes
//! back unchanged, kernel arguments are captured at the call as CUDA does, and the device starts
//! the command only when the XQueue launches it. Calls the shim does not intercept still run in
//! stream order after the gated ones.

use crate::guard::{self, Status};
use crate::state::{Key, shim};
use xsched_backend_cuda::{CudaCommand, sys};

/// Make `real` (the application's call, unchanged) on `stream` through its XQueue if the stream
/// is scheduled, else forward it. `stream` is `None` when the call names no readable stream
/// (the driver then reports the error).
pub(crate) fn submit(
    stream: Option<sys::CUstream>,
    ptsz: bool,
    real: &dyn Fn() -> Status,
) -> Status {
    guard::call(
        |real| {
            let scheduled = stream.and_then(|h| shim().and_then(|s| s.stream(Key::of(h, ptsz))));
            let Some(scheduled) = scheduled else {
                return real();
            };
            let (status, ticket) = match scheduled.xqueue.hw().enqueue(|_| real()) {
                Ok(made) => made,
                Err(e) => {
                    tracing::warn!("{e}: call forwarded unscheduled");
                    return real();
                }
            };
            // From here the call is in the stream: whatever happens, its gate opens (a ticket
            // that is dropped unlaunched still lets its command run).
            if let Err(e) = scheduled.xqueue.submit(CudaCommand::Enqueued(ticket)) {
                tracing::warn!("{e}: command runs unscheduled");
            }
            status
        },
        real,
    )
}
