//! The OpenCL calls a cut or whole launch makes: one command behind a gate, a launch made now,
//! the launch itself, the twin's extra size arguments, and a launch's device time.

use super::objects::set;
use super::shape::{NdRange, Shape};
use crate::gate::{self, Call};
use cl3::types::{cl_event, cl_int, cl_kernel, cl_uint};
use xsched_backend_opencl::{Event, OclQueue, cl3};
use xsched_core::{CommandMeta, Nanos};
use xsched_runtime::XQueue;

/// One command behind a gate: `real` made with `waits` and the gate, the command submitted to
/// the XQueue with `meta`. Its event, or the library's status; `Err` when no gate could be made
/// (nothing was enqueued).
pub(super) fn gated(
    xqueue: &XQueue<OclQueue>,
    waits: &[cl_event],
    real: impl FnOnce(&[cl_event]) -> Result<cl_event, cl_int>,
    meta: CommandMeta,
) -> Result<Result<Event, cl_int>, xsched_backend_opencl::OclError> {
    Ok(match xqueue.hw().enqueue_gated(waits, real)? {
        Err(code) => Err(code),
        Ok((event, command)) => {
            // Refused, the command is dropped unlaunched and its gate opens.
            if let Err(e) = xqueue.submit_with(command, meta) {
                tracing::warn!("{e}: command runs unscheduled");
            }
            Ok(event)
        }
    })
}

/// The launch as the application asked, made now without a gate (when none could be made).
pub(super) fn whole_now(call: &Call, nd: &NdRange, shape: &Shape, waits: &[cl_event]) -> cl_int {
    // SAFETY: the application's arguments, unchanged.
    let real = |n: cl_uint, l: *const cl_event| unsafe {
        enqueue(call.queue, nd.kernel, nd, shape, raw_list(n, l))
    };
    // SAFETY: the call's pointers are passed on unchanged.
    unsafe {
        gate::forward(
            &Call {
                num_events: waits.len() as cl_uint,
                wait_list: waits.as_ptr(),
                ..*call
            },
            &real,
        )
    }
}

/// `n` events at `list` as a slice (empty when NULL).
pub(super) fn raw_list<'a>(n: cl_uint, list: *const cl_event) -> &'a [cl_event] {
    if n == 0 || list.is_null() {
        &[]
    } else {
        // SAFETY: `n` events at `list`, as the gate and OpenCL's wait lists give them.
        unsafe { std::slice::from_raw_parts(list, n as usize) }
    }
}

/// `clEnqueueNDRangeKernel` of `kernel` over `shape` (its local size as given, its offset
/// `nd.offset`), waiting for `list`.
///
/// # Safety
/// `queue` and `kernel` are valid; `nd.offset` is NULL or holds `shape.dims` offsets.
pub(super) unsafe fn enqueue(
    queue: cl3::types::cl_command_queue,
    kernel: cl_kernel,
    nd: &NdRange,
    shape: &Shape,
    list: &[cl_event],
) -> Result<cl_event, cl_int> {
    let local = shape
        .local
        .as_ref()
        .map_or(std::ptr::null(), |l| l.as_ptr());
    let waits = if list.is_empty() {
        std::ptr::null()
    } else {
        list.as_ptr()
    };
    // SAFETY: valid handles by the caller's contract; sizes and offsets of `dims` entries.
    unsafe {
        cl3::command_queue::enqueue_nd_range_kernel(
            queue,
            kernel,
            shape.dims as cl_uint,
            nd.offset,
            shape.global.as_ptr(),
            local,
            list.len() as cl_uint,
            waits,
        )
    }
}

/// The whole launch's global size as the twin's three extra arguments, where it takes them.
pub(super) fn set_sizes(twin: usize, kernel: cl_kernel, shape: &Shape) -> Result<(), cl_int> {
    let own: u32 = cl3::kernel::get_kernel_info(kernel, opencl_sys::CL_KERNEL_NUM_ARGS)?.into();
    let twins: u32 =
        cl3::kernel::get_kernel_info(twin as cl_kernel, opencl_sys::CL_KERNEL_NUM_ARGS)?.into();
    if twins == own {
        return Ok(());
    }
    for d in 0..3 {
        let size = (shape.global[d] as u64).to_ne_bytes();
        let argument = super::objects::Argument {
            size: size.len(),
            value: Some(size.to_vec()),
        };
        set(twin, own + d as u32, &argument)?;
    }
    Ok(())
}

/// What the device says of a measured launch.
pub(super) enum Measured {
    /// Still queued or running.
    Pending,
    /// It ran for this long (the device's start to end).
    Took(Nanos),
    /// It failed, or the queue keeps no times.
    Unknown,
}

pub(super) fn device_time(event: &Event) -> Measured {
    let status =
        cl3::event::get_event_info(event.raw(), opencl_sys::CL_EVENT_COMMAND_EXECUTION_STATUS);
    match status.map(i32::from) {
        Ok(s) if s > opencl_sys::CL_COMPLETE => return Measured::Pending,
        Ok(s) if s == opencl_sys::CL_COMPLETE => {}
        _ => return Measured::Unknown,
    }
    let at = |what| {
        cl3::event::get_event_profiling_info(event.raw(), what)
            .ok()
            .map(u64::from)
    };
    match (
        at(opencl_sys::CL_PROFILING_COMMAND_START),
        at(opencl_sys::CL_PROFILING_COMMAND_END),
    ) {
        (Some(start), Some(end)) if end >= start => Measured::Took(Nanos(end - start)),
        _ => Measured::Unknown,
    }
}
