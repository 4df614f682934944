//! The OpenCL entry points the shim replaces. Each has the exact C signature of the real one;
//! everything else (including `clFlush`, `clFinish`, `clWaitForEvents`: the commands and events
//! are real, so the real functions are right) goes to the real library untouched.
//!
//! Real entry points come from `cl3`, which opens `libOpenCL.so.1` and looks symbols up in that
//! library and its dependencies only, so these exports never call themselves.
//!
//! Five enqueue exports differ only in their arguments and the real call, so one macro
//! (`enqueue_export!`) writes the rest; the kernel launch first offers itself to slicing. A test
//! holds every export to the Khronos signature.

#![allow(non_snake_case)]

use crate::gate::{self, Call};
use crate::slice;
use crate::state::{self, shim};
use cl3::error_codes::CL_SUCCESS;
use cl3::types::{
    CL_FALSE, cl_bool, cl_command_queue, cl_command_queue_properties, cl_context, cl_device_id,
    cl_event, cl_int, cl_kernel, cl_mem, cl_queue_properties, cl_uint,
};
use std::ffi::c_void;
use xsched_backend_opencl::cl3;
use xsched_interpose::guard;

/// A new queue: schedule it (or leave it unscheduled, logged), and report the status.
///
/// # Safety
/// `errcode_ret` is NULL or writable.
unsafe fn created(
    result: Result<cl_command_queue, cl_int>,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    let (queue, code) = match result {
        Ok(queue) => {
            guard::quietly("OpenCL", "scheduling a new queue", || {
                if let Some(s) = shim() {
                    state::adopt(s, queue);
                }
            });
            (queue, CL_SUCCESS)
        }
        Err(code) => (std::ptr::null_mut(), code),
    };
    if !errcode_ret.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { errcode_ret.write(code) };
    }
    queue
}

/// `clCreateCommandQueue` (OpenCL 1.x): the real queue, put under an XQueue if in-order.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateCommandQueue(
    context: cl_context,
    device: cl_device_id,
    properties: cl_command_queue_properties,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    let properties = properties | slice::profiling();
    // SAFETY: arguments passed on unchanged under the caller's contract (profiling added where
    // slicing measures launches).
    let result = unsafe { cl3::command_queue::create_command_queue(context, device, properties) };
    // SAFETY: `errcode_ret` under the caller's contract.
    unsafe { created(result, errcode_ret) }
}

/// `clCreateCommandQueueWithProperties` (OpenCL 2.0+): as `clCreateCommandQueue`.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateCommandQueueWithProperties(
    context: cl_context,
    device: cl_device_id,
    properties: *const cl_queue_properties,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    // SAFETY: the caller's zero-terminated list (or NULL), read to copy it.
    let with_profiling = unsafe { slice::with_profiling(properties) };
    let properties = with_profiling.as_ref().map_or(properties, |p| p.as_ptr());
    // SAFETY: arguments passed on unchanged under the caller's contract (profiling added where
    // slicing measures launches).
    let result = unsafe {
        cl3::command_queue::create_command_queue_with_properties(context, device, properties)
    };
    // SAFETY: `errcode_ret` under the caller's contract.
    unsafe { created(result, errcode_ret) }
}

/// `clReleaseCommandQueue`: on the application's last reference, drain the XQueue first.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clReleaseCommandQueue(queue: cl_command_queue) -> cl_int {
    guard::quietly("OpenCL", "releasing a queue", || {
        if let Some(s) = shim() {
            state::release(s, queue);
        }
    });
    // SAFETY: passed on unchanged under the caller's contract.
    match unsafe { cl3::command_queue::release_command_queue(queue) } {
        Ok(()) => CL_SUCCESS,
        Err(code) => code,
    }
}

/// Defines a scheduled `clEnqueue*` export. Its C signature is the queue (a
/// `cl_command_queue`), the listed arguments, then the three every enqueue ends with
/// (`num_events`, `wait_list`, `event`); its body hands the gate the real call. `blocking` says
/// whether the application waits for the command; `real` makes the call with the wait list the
/// gate gives it (`n` events at `list`).
macro_rules! enqueue_export {
    (
        $(#[$doc:meta])*
        fn $name:ident($queue:ident $(, $arg:ident: $ty:ty)* $(,)?);
        blocking: $blocking:expr;
        real: |$n:ident, $list:ident| $real:block
    ) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the OpenCL specification requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            $queue: cl_command_queue,
            $($arg: $ty,)*
            num_events: cl_uint,
            wait_list: *const cl_event,
            event: *mut cl_event,
        ) -> cl_int {
            let real = |$n: cl_uint, $list: *const cl_event| $real;
            let call = Call {
                queue: $queue,
                num_events,
                wait_list,
                event_out: event,
                blocking: $blocking,
            };
            // SAFETY: the caller's pointers, as OpenCL allows.
            unsafe { gate::enqueue(&call, &real) }
        }
    };
}

/// `clEnqueueNDRangeKernel`, scheduled, and cut into slices where slicing is on and the launch
/// is long (`slice`).
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clEnqueueNDRangeKernel(
    queue: cl_command_queue,
    kernel: cl_kernel,
    work_dim: cl_uint,
    global_work_offset: *const usize,
    global_work_size: *const usize,
    local_work_size: *const usize,
    num_events: cl_uint,
    wait_list: *const cl_event,
    event: *mut cl_event,
) -> cl_int {
    let call = Call {
        queue,
        num_events,
        wait_list,
        event_out: event,
        blocking: false,
    };
    let nd = slice::NdRange {
        kernel,
        work_dim,
        offset: global_work_offset,
        global: global_work_size,
        local: local_work_size,
    };
    // SAFETY: the caller's pointers, as OpenCL allows.
    if let Some(status) = unsafe { slice::enqueue_kernel(&call, &nd) } {
        xsched_backend_opencl::after_submit();
        return status;
    }
    let real = |n: cl_uint, list: *const cl_event| {
        // SAFETY: the application's arguments, unchanged, with a wait list of `n` events.
        unsafe {
            cl3::command_queue::enqueue_nd_range_kernel(
                queue,
                kernel,
                work_dim,
                global_work_offset,
                global_work_size,
                local_work_size,
                n,
                list,
            )
        }
    };
    // SAFETY: the caller's pointers, as OpenCL allows.
    unsafe { gate::enqueue(&call, &real) }
}

enqueue_export! {
    /// `clEnqueueTask`, scheduled.
    fn clEnqueueTask(queue, kernel: cl_kernel);
    blocking: false;
    real: |n, list| {
        // SAFETY: the application's arguments, unchanged, with a wait list of `n` events.
        unsafe { cl3::command_queue::enqueue_task(queue, kernel, n, list) }
    }
}

enqueue_export! {
    /// `clEnqueueReadBuffer`, scheduled; a blocking read returns when the data is there.
    fn clEnqueueReadBuffer(
        queue,
        buffer: cl_mem,
        blocking_read: cl_bool,
        offset: usize,
        size: usize,
        ptr: *mut c_void,
    );
    blocking: blocking_read != CL_FALSE;
    real: |n, list| {
        // SAFETY: the application's arguments, unchanged but non-blocking (the shim waits).
        unsafe {
            cl3::command_queue::enqueue_read_buffer(
                queue, buffer, CL_FALSE, offset, size, ptr, n, list,
            )
        }
    }
}

enqueue_export! {
    /// `clEnqueueWriteBuffer`, scheduled; a blocking write returns when the data was taken.
    fn clEnqueueWriteBuffer(
        queue,
        buffer: cl_mem,
        blocking_write: cl_bool,
        offset: usize,
        size: usize,
        ptr: *const c_void,
    );
    blocking: blocking_write != CL_FALSE;
    real: |n, list| {
        // SAFETY: the application's arguments, unchanged but non-blocking (the shim waits).
        unsafe {
            cl3::command_queue::enqueue_write_buffer(
                queue, buffer, CL_FALSE, offset, size, ptr, n, list,
            )
        }
    }
}

enqueue_export! {
    /// `clEnqueueCopyBuffer`, scheduled.
    fn clEnqueueCopyBuffer(
        queue,
        src: cl_mem,
        dst: cl_mem,
        src_offset: usize,
        dst_offset: usize,
        size: usize,
    );
    blocking: false;
    real: |n, list| {
        // SAFETY: the application's arguments, unchanged, with a wait list of `n` events.
        unsafe {
            cl3::command_queue::enqueue_copy_buffer(
                queue, src, dst, src_offset, dst_offset, size, n, list,
            )
        }
    }
}

enqueue_export! {
    /// `clEnqueueFillBuffer`, scheduled.
    fn clEnqueueFillBuffer(
        queue,
        buffer: cl_mem,
        pattern: *const c_void,
        pattern_size: usize,
        offset: usize,
        size: usize,
    );
    blocking: false;
    real: |n, list| {
        // SAFETY: the application's arguments, unchanged, with a wait list of `n` events.
        unsafe {
            cl3::command_queue::enqueue_fill_buffer(
                queue,
                buffer,
                pattern,
                pattern_size,
                offset,
                size,
                n,
                list,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use opencl_sys::cl_function_types as khronos;

    /// Each export has exactly the type of the OpenCL entry point it stands in for (this is
    /// checked when the test compiles).
    #[test]
    fn every_export_has_the_khronos_signature() {
        let _: khronos::clCreateCommandQueue_t = Some(super::clCreateCommandQueue);
        let _: khronos::clCreateCommandQueueWithProperties_t =
            Some(super::clCreateCommandQueueWithProperties);
        let _: khronos::clReleaseCommandQueue_t = Some(super::clReleaseCommandQueue);
        let _: khronos::clEnqueueNDRangeKernel_t = Some(super::clEnqueueNDRangeKernel);
        let _: khronos::clEnqueueTask_t = Some(super::clEnqueueTask);
        let _: khronos::clEnqueueReadBuffer_t = Some(super::clEnqueueReadBuffer);
        let _: khronos::clEnqueueWriteBuffer_t = Some(super::clEnqueueWriteBuffer);
        let _: khronos::clEnqueueCopyBuffer_t = Some(super::clEnqueueCopyBuffer);
        let _: khronos::clEnqueueFillBuffer_t = Some(super::clEnqueueFillBuffer);
    }
}
