//! The gate contract between a backend and a shim.
//!
//! A shim makes the application's call on the real queue at once, behind a *gate* the backend
//! builds (an OpenCL user event in the wait list, a CUDA stream-memory wait), so the real library
//! checks the call, its status goes back to the application unchanged, and arguments are
//! captured at the call as the API requires; the device starts the command only when the XQueue
//! launches it. The backend's gated command opens its gate when launched, and also when dropped
//! unlaunched: whatever fails on the xsched side, the application's command still runs.

use std::fmt::Display;
use xsched_runtime::{HwQueue, XQueue};

/// Hand a gated command to its XQueue. `made` is what the backend returned for the call made
/// behind a gate: the call's status and the command, or why no gate could be made (then nothing
/// was enqueued, and the call is forwarded unscheduled with `forward`).
pub fn submit<H: HwQueue, S, E: Display>(
    xqueue: &XQueue<H>,
    made: Result<(S, H::Command), E>,
    forward: impl FnOnce() -> S,
) -> S {
    let (status, command) = match made {
        Ok(made) => made,
        Err(e) => {
            tracing::warn!("{e}: call forwarded unscheduled");
            return forward();
        }
    };
    // From here the call is in the real queue: if the XQueue refuses it, the command is dropped
    // unlaunched and its gate opens.
    if let Err(e) = xqueue.submit(command) {
        tracing::warn!("{e}: command runs unscheduled");
    }
    status
}
