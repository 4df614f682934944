//! # xsched-backend-cuda
//!
//! NVIDIA GPUs under xsched: a CUDA stream as an xsched [`HwQueue`] ([`CudaStream`]) through the
//! CUDA driver API.
//!
//! - **Level 1**: launching enqueues the command on the stream and records an event after it; a
//!   watcher thread reports completions in order, so progressive launching keeps only a bounded
//!   amount of work in the stream. After a synchronization point the watcher also refills the
//!   queue itself (the XQueue's completion hook), so the launcher thread is not woken for it.
//! - **Level 2, without kernel instrumentation**: each command waits in the stream behind a
//!   *gate*, a `cuStreamWaitValue32` on a word of host memory mapped into the device. The host
//!   opens gates only just ahead of the completed commands; `deactivate` stops opening them, so
//!   queued commands do not start and only the running ones finish. Devices without stream
//!   memory operations get Level 1 only ([`capabilities`]).
//!
//! The driver is reached through `cudarc` with dynamic loading (CUDA 12.4 feature level): libcuda
//! is opened at run time, so a program using this crate builds and runs where no driver exists.
//! cudarc panics when the library is missing, so every entry first [`probe`]s for the driver
//! and reports [`CudaError::Unavailable`] instead.
//!
//! [`HwQueue`]: xsched_runtime::HwQueue

mod driver;
mod error;
mod event;
mod gates;
mod stream;
mod word;

pub use cudarc::driver::sys;
pub use driver::{
    CudaDevice, FIRST_DEVICE_ID, capabilities, device_id, devices, driver_version, probe,
};
pub use error::CudaError;
pub use stream::{
    CudaCommand, CudaStream, EnqueueFn, GATE_DEPTH, SELF_BLOCK_AFTER, SELF_BLOCK_AFTER_AGAIN,
    Ticket,
};
