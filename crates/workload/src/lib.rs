//! # xsched-workload
//!
//! What the experiments offer the scheduler, independent of who runs it: a seeded random
//! generator and the request streams built from it. The simulator replays them in virtual time
//! and the real-device benchmarks on the CPU device, so both measure the same workload.
//!
//! - [`rng::SeededRng`]: the one source of randomness of a run.
//! - [`service`]: the HP service of the harvesting experiments (requests of kernels and gaps).
//! - [`ai_pc`]: the AI-PC case study's modes, checks and figure.
//! - [`fg_bg`]: the foreground-beside-background experiment's modes and checks.
//! - [`harvest_case`]: the GPU-harvesting case study's modes, checks and figure.
//! - [`multi_device`]: the two-device pipeline's modes and check.
//! - [`two_model`]: the two-model serving case study's modes, checks and figure.

pub mod ai_pc;
pub mod fg_bg;
pub mod harvest_case;
pub mod multi_device;
pub mod rng;
pub mod service;
pub mod two_model;

pub use rng::SeededRng;
