//! # xsched-backend-opencl
//!
//! OpenCL under xsched: an in-order `cl_command_queue` as a Level-1 [`HwQueue`]
//! ([`OclQueue`]): launching enqueues (or opens the gate of a command enqueued earlier), and a
//! completion is reported from the command's event callback, so progressive launching keeps
//! only a bounded amount of work in the device's queue. The callback also refills the queue
//! after a synchronization point (the XQueue's completion hook), so the launcher thread is not
//! woken for it.
//!
//! libOpenCL is opened at run time (`opencl3`/`cl3` with their `dynamic` feature): a program
//! using this crate builds and runs where OpenCL is not installed, and [`devices`] then reports
//! [`OclError::Unavailable`]. The same code drives GPUs, NPUs and FPGAs with an OpenCL driver;
//! it is tested on POCL (CPU). On a CPU device, whose kernels run on the process's own threads,
//! Level 2 holds a deactivated queue by thread priority (`SCHED_IDLE`) where the process may
//! restore it.
//!
//! [`HwQueue`]: xsched_runtime::HwQueue

mod demote;
mod device;
mod error;
mod event;
mod hook;
mod queue;
mod spin;

pub use cl3;
pub use device::{FIRST_DEVICE_ID, OclDevice, capabilities, device_id_of, devices};
pub use error::OclError;
pub use event::Event;
pub use queue::{EnqueueFn, Gate, OclCommand, OclQueue};
pub use spin::{SpinKernel, Versions};

/// After the calling thread submitted to an XQueue of this backend: while the process's CPU
/// device is held (Level 2), the thread's own host work until its next submit runs on idle CPU
/// too (`demote.rs`). One atomic read when nothing is held.
pub fn after_submit() {
    demote::rejoin_hold();
}

/// Whether this process may undo a demotion of its threads (`CAP_SYS_NICE`, or an `RLIMIT_NICE`
/// that lets it return to its nice value), so that Level 2 by thread priority is offered on a
/// CPU device (checked once per process; a child started alike gets the same answer).
pub fn demotion_available() -> bool {
    demote::available()
}
