//! # xsched-interpose
//!
//! What both `LD_PRELOAD` shims (`xsched-shim-opencl`, `xsched-shim-cuda`) share, so each shim
//! keeps only its exported functions and the calls that are its API's own:
//!
//! - [`Interposer`]: the process's one xsched runtime (configured from `XSCHED_*` on first use)
//!   and the application's intercepted queues by key. A bad setting or a missing driver leaves
//!   the shim disabled, said once, and every call goes straight to the real library.
//! - [`guard`]: no panic unwinds into the application; on an internal failure a call is
//!   forwarded to the real library, once (a call already made is never repeated).
//! - [`PerProcess`] and [`atfork`]: the shim's state, one per process, so a forked child starts
//!   clean (its own runtime and daemon connection; the parent's connection closed in it).
//! - [`gated`]: the gate contract. A backend makes the application's call on the real queue at
//!   once, behind a gate that opens when the XQueue launches the command, or when the command
//!   is dropped unlaunched; [`gated::submit`] hands such a command to its XQueue, and forwards
//!   the call when no gate could be made.
//!
//! The crate is safe code but for the `pthread_atfork` registration ([`atfork`]); the shims'
//! exports hold the rest of the `unsafe` and its `// SAFETY:` comments.

pub mod atfork;
pub mod gated;
pub mod guard;
mod per_process;
mod registry;

pub use per_process::PerProcess;
pub use registry::Interposer;

/// The environment variables that steer an interposed process beyond its queues' own hints:
/// the preload itself and who schedules (what a launcher or a test clears for a native run).
pub const STEERING_VARS: &[&str] = &[
    "LD_PRELOAD",
    "XSCHED_SCHEDULER",
    "XSCHED_POLICY",
    "XSCHED_SOCKET",
    "XSCHED_PRIORITY",
    "XSCHED_MODE",
];
