//! # xsched-shim-cuda
//!
//! `libxsched_cuda.so` puts an unchanged CUDA program's streams under xsched:
//!
//! ```sh
//! cargo build --release -p xsched-shim-cuda
//! LD_PRELOAD=target/release/libxsched_cuda.so XSCHED_PRIORITY=10 python3 infer.py
//! # across processes: xsched serve & then XSCHED_SCHEDULER=global in each program's environment
//! ```
//!
//! Every stream the program uses (created streams, the legacy default stream per context, the
//! per-thread default stream per thread) becomes an XQueue, with hints and scheduler from
//! `XSCHED_*`; a stream created with a CUDA priority gets the process's `XSCHED_PRIORITY` raised
//! by minus that priority (CUDA's lower numbers are more urgent). Kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx`), graph launches
//! (`cuGraphLaunch`, one command per graph), async copies and memsets are made on the real
//! stream at once behind a gate the XQueue opens when it launches them
//! (`gate.rs`), so status codes, argument capture and events are the driver's, and a background
//! stream holds only a bounded amount of work the device may start. A copy through pageable host
//! memory, which may block its caller until the stream reaches it, goes to the driver ungated in
//! stream order instead (`pageable.rs`), and so does a kernel's first launch, which may load it
//! and synchronize the context (again after a module, a library or a context is unloaded, as a
//! new kernel may get a freed one's address), and every launch under `CUDA_LAUNCH_BLOCKING=1`
//! (`first_launch.rs`). The shim also answers
//! `cuGetProcAddress` and `dlsym` (`procaddr.rs`; `dlsym.rs`, where every other lookup keeps
//! its caller): the CUDA runtime (and so PyTorch) finds driver
//! functions that way, not by linking. A stream under capture passes through unscheduled while
//! it is captured (the capture records, nothing runs), with one log line; devices without
//! stream memory operations pass through. A stream made to wait on an event another scheduled
//! stream recorded first waits, in the calling thread, for that stream's commands before the
//! record (`state.rs`): left behind its opened gates, it could hold the recording stream
//! suspended for ever. No
//! panic crosses into the program; on an internal failure a call goes straight to the driver.
//!
//! Logs go to stderr, filtered by `XSCHED_LOG` (default `warn`).

mod dlsym;
mod exports;
mod first_launch;
mod gate;
mod pageable;
mod procaddr;
mod real;
mod state;

pub use dlsym::dlsym;
pub use exports::*;
pub use procaddr::{cuGetProcAddress, cuGetProcAddress_v2};
