//! # xsched-shim-opencl
//!
//! `libxsched_opencl.so` puts an unchanged OpenCL program's command queues under xsched:
//!
//! ```sh
//! cargo build --release -p xsched-shim-opencl
//! LD_PRELOAD=target/release/libxsched_opencl.so XSCHED_PRIORITY=10 ./my-opencl-app
//! # across processes: xsched serve & then XSCHED_SCHEDULER=global in each program's environment
//! ```
//!
//! Each in-order command queue the program creates becomes an XQueue (hints and scheduler from
//! `XSCHED_*`, read when the queue is created). Kernel launches and buffer reads, writes,
//! copies and fills on it are enqueued behind a gate that the XQueue opens when it launches
//! them (see `gate.rs`), so a background queue holds only a bounded amount of work in the real
//! queue and a foreground one waits only for that. Out-of-order and on-device queues pass
//! through unscheduled, with one log line. Status codes, events and blocking behaviour are the
//! real library's; no panic crosses into the program, and an internal failure makes a call go
//! straight to OpenCL (the interposer, guard and gate contract are `xsched-interpose`'s).
//!
//! Logs go to stderr, filtered by `XSCHED_LOG` (default `warn`).

mod exports;
mod forward;
mod gate;
mod program_exports;
mod slice;
mod state;

pub use exports::{
    clCreateCommandQueue, clCreateCommandQueueWithProperties, clEnqueueCopyBuffer,
    clEnqueueFillBuffer, clEnqueueNDRangeKernel, clEnqueueReadBuffer, clEnqueueTask,
    clEnqueueWriteBuffer, clReleaseCommandQueue,
};
