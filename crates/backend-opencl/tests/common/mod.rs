//! What the OpenCL tests share: an OpenCL context, queue and program on the first device (POCL
//! here), a runtime, and a `record` kernel that appends its tag to a log, so a test reads back
//! the order commands ran in.

#![allow(dead_code)] // each test file uses its own part

use std::sync::Arc;
use xsched_backend_opencl::cl3::memory::CL_MEM_READ_WRITE;
use xsched_backend_opencl::cl3::types::{CL_BLOCKING, cl_int, cl_uint};
use xsched_backend_opencl::{Event, OclQueue, cl3};
use xsched_runtime::{Runtime, RuntimeConfig, WhoSchedules};

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem};
use opencl3::program::Program;

const SOURCE: &str = r"
__kernel void record(__global uint* log, __global uint* next, uint tag) {
    log[next[0]] = tag;
    next[0] += 1;
}";

pub struct Cl {
    pub context: Context,
    pub queue: CommandQueue,
    pub program: Program,
}

/// An OpenCL context, queue and program on the first device, or `None` (skip) outside CI.
pub fn opencl() -> Option<Cl> {
    let device = match xsched_backend_opencl::devices() {
        Ok(_) => opencl3::device::get_all_devices(cl3::device::CL_DEVICE_TYPE_ALL)
            .expect("devices listed once already")[0],
        Err(e) => {
            assert!(
                std::env::var("CI").is_err(),
                "CI needs OpenCL (POCL: scripts/test.sh installs it): {e}"
            );
            eprintln!("skipped: {e} (scripts/test.sh installs POCL)");
            return None;
        }
    };
    let context = Context::from_device(&Device::new(device)).expect("context");
    let queue = CommandQueue::create_default_with_properties(&context, 0, 0).expect("queue");
    let program =
        Program::create_and_build_from_source(&context, SOURCE, "").expect("program builds");
    Some(Cl {
        context,
        queue,
        program,
    })
}

pub fn app_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

pub fn hw(cl: &Cl) -> Arc<OclQueue> {
    // SAFETY: the queue is valid while `cl` lives; OclQueue keeps its own reference.
    Arc::new(unsafe { OclQueue::from_raw(cl.queue.get()) }.expect("scheduled queue"))
}

pub fn buffer(cl: &Cl, n: usize) -> Buffer<cl_uint> {
    // SAFETY: no host pointer is given; the buffer is filled by a blocking write below.
    let mut buf = unsafe {
        Buffer::<cl_uint>::create(&cl.context, CL_MEM_READ_WRITE, n, std::ptr::null_mut())
    }
    .expect("buffer");
    let zeros = vec![0; n];
    // SAFETY: blocking write of `n` values from a live slice.
    unsafe {
        cl.queue
            .enqueue_write_buffer(&mut buf, CL_BLOCKING, 0, &zeros, &[])
    }
    .expect("write");
    buf
}

pub fn read(cl: &Cl, buf: &Buffer<cl_uint>, n: usize) -> Vec<cl_uint> {
    let mut out = vec![0; n];
    // SAFETY: blocking read into a live slice of the buffer's size.
    unsafe {
        cl.queue
            .enqueue_read_buffer(buf, CL_BLOCKING, 0, &mut out, &[])
    }
    .expect("read");
    out
}

/// A `record(log, next, tag)` kernel with its arguments set.
pub fn record_kernel(
    cl: &Cl,
    log: &Buffer<cl_uint>,
    next: &Buffer<cl_uint>,
    tag: cl_uint,
) -> Kernel {
    let kernel = Kernel::create(&cl.program, "record").expect("kernel");
    // SAFETY: argument types match the kernel's signature (two buffers, one uint).
    unsafe {
        kernel.set_arg(0, &log.get()).expect("arg 0");
        kernel.set_arg(1, &next.get()).expect("arg 1");
        kernel.set_arg(2, &tag).expect("arg 2");
    }
    kernel
}

/// Enqueue `kernel` as one work item on `queue`, after `wait`.
pub fn enqueue(
    queue: cl3::types::cl_command_queue,
    kernel: &Kernel,
    wait: &[cl3::types::cl_event],
) -> Result<Event, cl_int> {
    let global = [1usize];
    // SAFETY: valid queue and kernel with all arguments set; `global` outlives the call; the
    // wait list pointer is null exactly when it is empty.
    let raw = unsafe {
        cl3::command_queue::enqueue_nd_range_kernel(
            queue,
            kernel.get(),
            1,
            std::ptr::null(),
            global.as_ptr(),
            std::ptr::null(),
            wait.len() as cl_uint,
            if wait.is_empty() {
                std::ptr::null()
            } else {
                wait.as_ptr()
            },
        )
    }?;
    // SAFETY: the enqueue handed us one reference to a new event.
    Ok(unsafe { Event::from_raw(raw) })
}

/// Moves a kernel into a launch closure (kernels are not `Send`; this one is used by one
/// thread at a time and its arguments are already set).
pub struct SendKernel(pub Kernel);
// SAFETY: the kernel's arguments are set before it moves, and only the launcher uses it.
unsafe impl Send for SendKernel {}

/// A log the `record` kernel appends tags to, with its write position.
pub struct Log {
    pub log: Buffer<cl_uint>,
    pub next: Buffer<cl_uint>,
}

impl Log {
    /// Room for `n` tags.
    pub fn new(cl: &Cl, n: usize) -> Log {
        Log {
            log: buffer(cl, n),
            next: buffer(cl, 1),
        }
    }
}
