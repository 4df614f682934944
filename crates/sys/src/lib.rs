//! # xsched-sys
//!
//! The OS-facing helpers that the client runtime (`xsched-runtime`) and the daemon
//! (`xsched-daemon`) share, with no scheduling in them:
//!
//! - [`clock`]: the process's monotonic clock, as the core's [`Nanos`](xsched_core::Nanos).
//! - [`prompt`]: real-time (`SCHED_FIFO` 1) control threads while threads wait for a CPU (or
//!   as `XSCHED_RT_CONTROL` says), and the guard that drops a busy one back to normal priority.
//! - [`fork`]: the descriptors a forked child must close, and the count of forks.
//! - [`stamps`]: opt-in time stamps along a decision's path, for measuring it across processes.
//!
//! Why a crate of its own: the daemon needs the clock and prompt control threads, which lived
//! in the runtime, so it linked the whole client runtime (launcher threads, the agent, the
//! in-process scheduler) for two small modules. Here both depend on these helpers and the
//! daemon on nothing of the client. The runtime re-exports the modules where they were
//! (`xsched_runtime::{clock, fork, prompt, stamps}`), so its users are unchanged.

#![forbid(unsafe_code)]

pub mod clock;
pub mod fork;
pub mod prompt;
pub mod stamps;
