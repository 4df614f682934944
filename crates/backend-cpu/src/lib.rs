//! # xsched-backend-cpu
//!
//! The built-in device every machine has: the CPU, shaped like an accelerator so that all three
//! preemption levels can be implemented and measured for real.
//!
//! A [`CpuDevice`] has N worker threads and one bounded hardware FIFO, filled in launch order by
//! all of its [`CpuQueue`]s (like a GPU's single hardware channel: natively, a foreground
//! command waits behind everything launched before it). The device runs one command at a time;
//! a kernel's tiles are spread over all workers. Kernels are resumable [`Kernel`]s with a
//! checkpoint at every tile boundary:
//!
//! - Level 1: the XQueue stops launching; the FIFO drains.
//! - Level 2 (`deactivate`): the device stops taking this queue's commands from the FIFO.
//! - Level 3 (`interrupt`): also, the running kernel stops at its next tile boundary; `restore`
//!   continues it from there (progress kept, no tile run twice).

#![forbid(unsafe_code)]

mod device;
mod kernel;
pub mod kernels;

pub use device::{CpuDevice, CpuQueue, DEFAULT_FIFO_CAPACITY};
pub use kernel::{CpuCommand, Kernel};
