//! A calibrated busy kernel on the first OpenCL device, for measuring the backend on this
//! machine (`xsched probe`): commands of a chosen length, new in-order queues to run them on,
//! and the platform's and driver's version strings the measurements are stamped with.

use crate::error::OclError;
use crate::event::Event;
use crate::queue::{OclCommand, OclQueue};
use cl3::device::CL_DEVICE_TYPE_ALL;
use cl3::types::{cl_command_queue, cl_uint, cl_ulong};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE, ClMem};
use opencl3::program::Program;
use std::time::{Duration, Instant};

const SOURCE: &str = r"
__kernel void spin(ulong iterations, __global ulong* out) {
    ulong x = get_global_id(0) + 1;
    for (ulong i = 0; i < iterations; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    }
    out[0] = x;
}";

/// What the measurements are stamped with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// `CL_DEVICE_NAME`.
    pub device: String,
    /// `CL_PLATFORM_VERSION` (POCL's says its own version and build).
    pub platform: String,
    /// `CL_DRIVER_VERSION`.
    pub driver: String,
}

/// The busy kernel built on the first OpenCL device.
pub struct SpinKernel {
    context: Context,
    program: Program,
    out: Buffer<cl_ulong>,
    versions: Versions,
    /// Loop iterations per microsecond, measured by [`calibrate`](Self::calibrate).
    per_us: f64,
}

impl SpinKernel {
    /// Build the kernel on the first device; [`OclError::Unavailable`] without OpenCL.
    pub fn first_device() -> Result<SpinKernel, OclError> {
        let raw = crate::devices()?;
        if raw.is_empty() {
            return Err(OclError::Unavailable("no OpenCL device found".into()));
        }
        let ids = opencl3::device::get_all_devices(CL_DEVICE_TYPE_ALL)
            .map_err(|e| OclError::call("clGetDeviceIDs", e.0))?;
        let id = *ids
            .first()
            .ok_or_else(|| OclError::Unavailable("no OpenCL device found".into()))?;
        let device = Device::new(id);
        let info = |e: opencl3::error_codes::ClError| OclError::call("clGetDeviceInfo", e.0);
        let platform = device
            .platform()
            .and_then(|p| opencl3::platform::Platform::new(p).version())
            .map_err(|e| OclError::call("clGetPlatformInfo", e.0))?;
        let versions = Versions {
            device: device.name().map_err(info)?,
            platform,
            driver: device.driver_version().map_err(info)?,
        };
        let context =
            Context::from_device(&device).map_err(|e| OclError::call("clCreateContext", e.0))?;
        let program =
            Program::create_and_build_from_source(&context, SOURCE, "").map_err(|log| {
                OclError::Unavailable(format!("the spin kernel does not build: {log}"))
            })?;
        // SAFETY: no host pointer is given; the kernel only writes the buffer.
        let out = unsafe {
            Buffer::<cl_ulong>::create(&context, CL_MEM_READ_WRITE, 1, std::ptr::null_mut())
        }
        .map_err(|e| OclError::call("clCreateBuffer", e.0))?;
        Ok(SpinKernel {
            context,
            program,
            out,
            versions,
            per_us: 0.0,
        })
    }

    /// The device's, platform's and driver's names and versions.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// A new in-order queue on the device, scheduled by xsched.
    pub fn queue(&self) -> Result<OclQueue, OclError> {
        let queue = CommandQueue::create_default_with_properties(&self.context, 0, 0)
            .map_err(|e| OclError::call("clCreateCommandQueueWithProperties", e.0))?;
        // SAFETY: `queue` is a valid queue; OclQueue takes its own reference before this one
        // is released at the end of the scope.
        unsafe { OclQueue::from_raw(queue.get()) }
    }

    /// Measure how many iterations take a microsecond: one untimed run first (the driver may
    /// compile the kernel at its first enqueue), then the fastest of three runs of at least
    /// 20 ms each (blocking).
    pub fn calibrate(&mut self) -> Result<(), OclError> {
        let queue = CommandQueue::create_default_with_properties(&self.context, 0, 0)
            .map_err(|e| OclError::call("clCreateCommandQueueWithProperties", e.0))?;
        let run = |iterations: cl_ulong| -> Result<Duration, OclError> {
            let kernel = self.kernel(iterations)?;
            let start = Instant::now();
            enqueue(queue.get(), &kernel)
                .map_err(|c| OclError::call("clEnqueueNDRangeKernel", c))?
                .wait()?;
            Ok(start.elapsed())
        };
        run(1000)?;
        let mut iterations: cl_ulong = 100_000;
        while run(iterations)? < Duration::from_millis(20) && iterations < 1 << 40 {
            iterations *= 4;
        }
        let fastest = (0..3)
            .map(|_| run(iterations))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .min()
            .unwrap_or(Duration::from_millis(20));
        self.per_us = iterations as f64 / (fastest.as_secs_f64() * 1e6).max(1e-3);
        Ok(())
    }

    /// A command that keeps one device thread busy for about `length` (after
    /// [`calibrate`](Self::calibrate); before it, a command of one iteration).
    pub fn command(&self, length: Duration) -> Result<OclCommand, OclError> {
        let iterations = (self.per_us * length.as_secs_f64() * 1e6).max(1.0) as cl_ulong;
        let kernel = SendKernel(self.kernel(iterations)?);
        Ok(OclCommand::Enqueue(Box::new(move |raw| {
            enqueue(raw, &kernel.0)
        })))
    }

    fn kernel(&self, iterations: cl_ulong) -> Result<Kernel, OclError> {
        let kernel = Kernel::create(&self.program, "spin")
            .map_err(|e| OclError::call("clCreateKernel", e.0))?;
        // SAFETY: the arguments match the kernel's signature (a ulong, then a buffer).
        unsafe {
            kernel
                .set_arg(0, &iterations)
                .and_then(|()| kernel.set_arg(1, &self.out.get()))
        }
        .map_err(|e| OclError::call("clSetKernelArg", e.0))?;
        Ok(kernel)
    }
}

/// A kernel moved into a launch closure. OpenCL kernels are not `Send` because setting their
/// arguments from several threads races; this one's are set before it moves, and only the
/// launching thread uses it after.
struct SendKernel(Kernel);
// SAFETY: see above: no argument is set after the move, and enqueueing a kernel is thread-safe.
unsafe impl Send for SendKernel {}

/// Enqueue `kernel` as one work item on `queue`.
fn enqueue(queue: cl_command_queue, kernel: &Kernel) -> Result<Event, cl3::types::cl_int> {
    let global = [1usize];
    // SAFETY: a valid queue and a kernel with every argument set; `global` outlives the call;
    // no wait list.
    let raw = unsafe {
        cl3::command_queue::enqueue_nd_range_kernel(
            queue,
            kernel.get(),
            1 as cl_uint,
            std::ptr::null(),
            global.as_ptr(),
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
    }?;
    // SAFETY: the enqueue handed us one reference to a new event.
    Ok(unsafe { Event::from_raw(raw) })
}
