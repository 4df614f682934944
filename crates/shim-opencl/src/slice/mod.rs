//! Kernel slicing (docs/KERNEL-SLICING.md): a long launch on a scheduled queue becomes
//! consecutive work-group ranges, each its own XQueue command, so the XQueue can stop between
//! them. Opt-in with `XSCHED_SLICE_US` (the slice budget in µs; unset or 0: off).
//!
//! This module keeps what slicing needs to know of the application's objects: each program's
//! source (and the twin it would get, `rewrite.rs`), each kernel's name and arguments (so a twin
//! kernel, built only when a launch of it is first cut, gets the same ones, `twin.rs`), and each
//! kernel's last measured launch. `launch.rs` cuts launches; the decision is `xsched-core`'s
//! [`SlicePlanner`](xsched_core::slice::SlicePlanner).

mod binaries;
mod calls;
mod error;
mod launch;
mod objects;
mod rewrite;
mod shape;
mod state;
mod twin;

pub(crate) use launch::enqueue_kernel;
pub(crate) use shape::NdRange;
pub(crate) use state::{profiling, slicing, with_profiling};
