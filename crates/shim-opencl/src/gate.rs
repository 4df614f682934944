//! How an intercepted enqueue becomes an XQueue command (`xsched_interpose::gated`).
//!
//! The application's call is made on the real queue at once, with one more event in its wait
//! list: a gate (a user event, made by the backend) that the XQueue completes when it launches
//! the command. So the real library checks the call and its status code goes back to the
//! application unchanged; kernel arguments are captured at the call, as OpenCL requires; the
//! event the application gets is the command's real event (valid in wait lists,
//! `clWaitForEvents`, profiling); and commands the shim does not intercept, enqueued later on
//! the same in-order queue, still run after the gated ones. A blocking call is made
//! non-blocking and then waited for, since its gate opens only after the call returns.

use crate::state::scheduled;
use cl3::error_codes::CL_SUCCESS;
use cl3::types::{cl_command_queue, cl_event, cl_int, cl_uint};
use xsched_backend_opencl::{Event, cl3};
use xsched_interpose::{gated, guard};

/// The real enqueue, given the wait list to use, never blocking; returns the command's event.
pub(crate) type Real<'a> = &'a dyn Fn(cl_uint, *const cl_event) -> Result<cl_event, cl_int>;

/// One intercepted enqueue call's event arguments.
#[derive(Clone, Copy)]
pub(crate) struct Call {
    pub(crate) queue: cl_command_queue,
    pub(crate) num_events: cl_uint,
    pub(crate) wait_list: *const cl_event,
    pub(crate) event_out: *mut cl_event,
    /// A blocking read or write (made non-blocking, then waited for).
    pub(crate) blocking: bool,
}

/// Hand the application its event reference (or release it if it asked for none).
///
/// # Safety
/// `out` is NULL or valid for writing one event.
pub(crate) unsafe fn give(event: Event, out: *mut cl_event) {
    if !out.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { out.write(event.into_raw()) };
    }
}

/// Forward the call to the real library unchanged (a blocking call waits for its event).
///
/// # Safety
/// The call's pointers are as OpenCL allows (they are passed on unchanged).
pub(crate) unsafe fn forward(call: &Call, real: Real<'_>) -> cl_int {
    let event = match real(call.num_events, call.wait_list) {
        // SAFETY: the real enqueue handed us one reference.
        Ok(raw) => unsafe { Event::from_raw(raw) },
        Err(code) => return code,
    };
    let status = if call.blocking {
        wait(&event)
    } else {
        CL_SUCCESS
    };
    // SAFETY: `event_out` is the application's, NULL or writable by the caller's contract.
    unsafe { give(event, call.event_out) };
    status
}

/// What a blocking call returns once its command ended.
fn wait(event: &Event) -> cl_int {
    match event.wait() {
        Ok(()) => CL_SUCCESS,
        Err(_) => cl3::error_codes::CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
    }
}

/// Enqueue `call` through its XQueue if its queue is scheduled, else forward it; no panic
/// reaches the application, and a call made is never made twice.
///
/// # Safety
/// The call's pointers are as OpenCL allows: `wait_list` points to `num_events` events when
/// both are non-zero, `event_out` is NULL or writable.
pub(crate) unsafe fn enqueue(call: &Call, real: Real<'_>) -> cl_int {
    // SAFETY: the call's pointers are passed on unchanged, under the caller's contract.
    let forwarded = || unsafe { forward(call, real) };
    guard::call_made(
        "OpenCL",
        |made| {
            // An inconsistent wait list goes to the real library as is: it reports the error.
            let consistent = call.wait_list.is_null() == (call.num_events == 0);
            let Some(xqueue) = scheduled(call.queue).filter(|_| consistent) else {
                return made(forwarded());
            };
            let waits = if call.num_events == 0 {
                &[][..]
            } else {
                // SAFETY: non-null with `num_events` entries (checked consistent above; the
                // caller's contract for the rest).
                unsafe { std::slice::from_raw_parts(call.wait_list, call.num_events as usize) }
            };
            let (gated, blocker) = match xqueue
                .hw()
                .enqueue_gated(waits, |list| real(list.len() as cl_uint, list.as_ptr()))
            {
                Ok(Err(code)) => return made(code),
                Ok(Ok((event, command))) => {
                    made(CL_SUCCESS);
                    let blocker = call.blocking.then(|| event.retained().ok()).flatten();
                    // SAFETY: `event_out` is the application's, NULL or writable.
                    unsafe { give(event, call.event_out) };
                    (Ok((CL_SUCCESS, command)), blocker)
                }
                Err(e) => (Err(e), None),
            };
            let status = gated::submit(&xqueue, gated, || made(forwarded()));
            let status = blocker.as_ref().map_or(status, wait);
            xsched_backend_opencl::after_submit();
            status
        },
        &forwarded,
    )
}
