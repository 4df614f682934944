//! The OpenCL backend on a real OpenCL implementation (POCL here, installed by
//! `scripts/test.sh`). Without OpenCL these tests fail under CI (`CI=true`) and are skipped
//! elsewhere, saying why.

use std::sync::Arc;
use std::time::Duration;
use xsched_backend_opencl::cl3::event::{CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS};
use xsched_backend_opencl::cl3::memory::CL_MEM_READ_WRITE;
use xsched_backend_opencl::cl3::types::{CL_BLOCKING, cl_int, cl_uint};
use xsched_backend_opencl::{Event, OclCommand, OclError, OclQueue, cl3};
use xsched_core::{CoreError, Level};
use xsched_runtime::{
    CommandError, HwError, HwQueue, QueueOptions, Runtime, RuntimeConfig, RuntimeError,
    SchedulerMode,
};

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

struct Cl {
    context: Context,
    queue: CommandQueue,
    program: Program,
}

/// An OpenCL context, queue and program on the first device, or `None` (skip) outside CI.
fn opencl() -> Option<Cl> {
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

fn app_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: SchedulerMode::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

fn hw(cl: &Cl) -> Arc<OclQueue> {
    // SAFETY: the queue is valid while `cl` lives; OclQueue keeps its own reference.
    Arc::new(unsafe { OclQueue::from_raw(cl.queue.get()) }.expect("scheduled queue"))
}

fn buffer(cl: &Cl, n: usize) -> Buffer<cl_uint> {
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

fn read(cl: &Cl, buf: &Buffer<cl_uint>, n: usize) -> Vec<cl_uint> {
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
fn record_kernel(cl: &Cl, log: &Buffer<cl_uint>, next: &Buffer<cl_uint>, tag: cl_uint) -> Kernel {
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
fn enqueue(
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
struct SendKernel(Kernel);
// SAFETY: the kernel's arguments are set before it moves, and only the launcher uses it.
unsafe impl Send for SendKernel {}

fn status(event: &Event) -> cl_int {
    cl3::event::get_event_info(event.raw(), CL_EVENT_COMMAND_EXECUTION_STATUS)
        .expect("status")
        .into()
}

#[test]
fn the_device_is_listed_with_a_level_1_capability_table() {
    let Some(_cl) = opencl() else { return };
    let devices = xsched_backend_opencl::devices().expect("devices");
    assert!(!devices.is_empty());
    assert_eq!(
        devices[0].id,
        xsched_core::DeviceId(xsched_backend_opencl::FIRST_DEVICE_ID)
    );
    let caps = xsched_backend_opencl::capabilities();
    assert_eq!(caps.max_level, Level::Block);
    assert!(!caps.keeps_state);
}

#[test]
fn launched_commands_run_in_submission_order_and_complete() {
    let Some(cl) = opencl() else { return };
    let (log, next) = (buffer(&cl, 32), buffer(&cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(&cl), QueueOptions::default())
        .expect("xqueue");
    let mut handles = Vec::new();
    for tag in 0..32 {
        let kernel = SendKernel(record_kernel(&cl, &log, &next, tag + 100));
        let cmd = OclCommand::Enqueue(Box::new(move |raw| enqueue(raw, &kernel.0, &[])));
        handles.push(q.submit(cmd).expect("submit"));
    }
    for h in &handles {
        assert_eq!(h.wait(), Ok(()));
    }
    q.hw().synchronize().expect("synchronize");
    let want: Vec<cl_uint> = (100..132).collect();
    assert_eq!(read(&cl, &log, 32), want);
}

#[test]
fn a_gated_command_reaches_the_device_only_when_launched() {
    let Some(cl) = opencl() else { return };
    let (log, next) = (buffer(&cl, 1), buffer(&cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(&cl), QueueOptions::default())
        .expect("xqueue");
    q.suspend().expect("suspend");
    let kernel = record_kernel(&cl, &log, &next, 7);
    let (mine, gated) = q
        .hw()
        .enqueue_gated(&[], |waits| {
            enqueue(cl.queue.get(), &kernel, waits).map(Event::into_raw)
        })
        .expect("a gate")
        .expect("enqueued behind the gate");
    cl.queue.flush().expect("flush");
    let handle = q.submit(gated).expect("submit");
    std::thread::sleep(Duration::from_millis(50));
    assert_ne!(status(&mine), CL_COMPLETE, "suspended: not launched yet");
    assert!(!handle.is_done());
    q.resume().expect("resume");
    assert_eq!(handle.wait(), Ok(()));
    assert_eq!(status(&mine), CL_COMPLETE);
    assert_eq!(read(&cl, &log, 1), vec![7]);
}

#[test]
fn a_failed_enqueue_fails_its_command_with_the_status_and_the_queue_goes_on() {
    let Some(cl) = opencl() else { return };
    let (log, next) = (buffer(&cl, 1), buffer(&cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(&cl), QueueOptions::default())
        .expect("xqueue");
    let bad = q
        .submit(OclCommand::Enqueue(Box::new(|_| {
            Err(cl3::error_codes::CL_INVALID_KERNEL)
        })))
        .expect("submit");
    let kernel = SendKernel(record_kernel(&cl, &log, &next, 9));
    let good = q
        .submit(OclCommand::Enqueue(Box::new(move |raw| {
            enqueue(raw, &kernel.0, &[])
        })))
        .expect("submit");
    match bad.wait() {
        Err(CommandError::Failed(msg)) => assert!(msg.contains("CL_INVALID_KERNEL"), "{msg}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(good.wait(), Ok(()));
    assert_eq!(read(&cl, &log, 1), vec![9]);
}

#[test]
fn levels_2_and_3_are_refused_clearly() {
    let Some(cl) = opencl() else { return };
    let rt = app_runtime();
    let err = rt
        .create_queue(
            hw(&cl),
            QueueOptions::default().with_level(Level::Deactivate),
        )
        .err();
    assert!(matches!(
        err,
        Some(RuntimeError::Core(CoreError::UnsupportedLevel {
            requested: Level::Deactivate,
            max: Level::Block
        }))
    ));
    let q = hw(&cl);
    assert_eq!(q.deactivate(), Err(HwError::Unsupported(Level::Deactivate)));
    assert_eq!(q.interrupt(), Err(HwError::Unsupported(Level::Interrupt)));
}

#[test]
fn an_invalid_queue_is_refused_with_the_status() {
    let Some(_cl) = opencl() else { return };
    // SAFETY: a null queue is rejected by the OpenCL loader before any dereference.
    let err = unsafe { OclQueue::from_raw(std::ptr::null_mut()) }.err();
    assert!(
        matches!(err, Some(OclError::Call { code, .. }) if code == cl3::error_codes::CL_INVALID_COMMAND_QUEUE),
        "{err:?}"
    );
}

#[test]
fn a_gated_command_dropped_unlaunched_still_runs_and_finish_returns() {
    let Some(cl) = opencl() else { return };
    let (log, next) = (buffer(&cl, 1), buffer(&cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(&cl), QueueOptions::default())
        .expect("xqueue");
    q.suspend().expect("suspend");
    let kernel = record_kernel(&cl, &log, &next, 9);
    let (mine, gated) = q
        .hw()
        .enqueue_gated(&[], |waits| {
            enqueue(cl.queue.get(), &kernel, waits).map(Event::into_raw)
        })
        .expect("a gate")
        .expect("enqueued behind the gate");
    let handle = q.submit(gated).expect("submit");
    // The command is cancelled before launch: xsched drops it, and its gate opens, so the
    // application's real command is not left behind a closed gate (clFinish would hang).
    assert_eq!(q.cancel_pending().expect("cancel"), 1);
    assert!(handle.wait().is_err(), "cancelled on the xsched side");
    cl.queue.finish().expect("clFinish returns");
    assert_eq!(status(&mine), CL_COMPLETE);
    assert_eq!(read(&cl, &log, 1), vec![9]);
}
