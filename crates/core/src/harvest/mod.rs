//! Harvesting an HP service's idle device time for best-effort LP work (Hummingbird,
//! ../shared/docs/PAPERS.md §2), as one sans-IO machine every driver shares.
//!
//! - [`GapLearner`]: recent durations of one kind and conservative predictions from them.
//! - [`Collector`]: the idle-slice collector: gap learning per request position, slack per
//!   deadline, slice admission and merging ([`Grant`]), wait-or-kill
//!   ([`Collector::slack_covers`]).
//!
//! The simulator's harvest model (`xsched_sim::harvest`) and `xsched bench harvest` drive the
//! collector with slice-level operations (they issue the LP slices themselves); real
//! applications get it as the `slo-aware` policy, which drives the same collector from queue
//! events and turns its grants into suspend/resume operations.

mod collector;
mod learner;

pub use collector::{Collector, CollectorConfig, CollectorOptions, Grant, MERGE_SLICES};
pub use learner::GapLearner;
