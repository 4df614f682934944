//! # xsched-sim
//!
//! A deterministic discrete-event simulator of accelerators shared under xsched. It drives the
//! very `LaunchMachine` and `QueueScheduler` of `xsched-core` that the runtime uses, in virtual time,
//! so what-if studies are exact and repeatable (same seed, same bytes of output) and the
//! XSched results that need hardware we do not have can be reproduced from device profiles.
//!
//! # Errors
//!
//! Every fallible public function returns [`ScenarioError`]: a scenario file that cannot be read
//! or is inconsistent, or a spec (from a file or built in code) that [`Sim::new`] refuses.

pub mod device;
pub mod engine;
mod error;
pub mod harvest;
pub mod metrics;
mod place;
pub mod profile;
pub mod spec;

pub use engine::{Sim, SimResult, simulate};
pub mod scenario;
pub use scenario::{Scenario, ScenarioError};
