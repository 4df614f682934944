//! The engine simulator as a driver of the scheduling core: arrivals, one or more simulated
//! engines (`engine.rs`) and one [`RequestScheduler`](xsched_llm_core::RequestScheduler) between
//! them, in virtual time. Whatever the scheduler decides here is what it decides in the gateway
//! given the same inputs.
//!
//! The event loop: the engine whose clock is earliest steps next; an arrival is handled once
//! every busy engine has reached its time. After each step the engine's progress, completions
//! and preemptions go to the scheduler, then its report (what it can start next), and the
//! scheduler's decisions (admit, pause, shed) are carried out at once.
//!
//! Predictions come from where the policy says (`PredictionSource`): the history predictor, learning
//! online from every completed request (after `warm` has filled it); the prior; or the truth.
//! A cluster runs one scheduler and one history for all its engines.

mod contract;
mod oracle;
mod world;

pub use contract::{Cluster, DEFAULT_HISTORY, Hang, Rules, Runs, SimError, SimRun};

use crate::Request;
use crate::engine::EngineConfig;
use xsched_llm_core::RequestPolicySpec;

/// Run `requests` (sorted by arrival, ids their positions) through `cluster`'s engines of `cfg`
/// under `policy`, the history (of `history` entries) first filled with `warm`.
pub fn simulate(
    cfg: &EngineConfig,
    cluster: Cluster,
    policy: RequestPolicySpec,
    history: usize,
    warm: &[Request],
    requests: &[Request],
) -> Result<SimRun, SimError> {
    let runs = Runs {
        cfg,
        cluster,
        history,
        warm,
    };
    runs.simulate(policy, &Rules::default(), requests)
}

impl Runs<'_> {
    /// Run `requests` (sorted by arrival, ids their positions) under `policy` and `rules`.
    pub fn simulate(
        &self,
        policy: RequestPolicySpec,
        rules: &Rules,
        requests: &[Request],
    ) -> Result<SimRun, SimError> {
        world::run(self, policy, rules, requests)
    }
}
