//! What a run is given (the engines behind the scheduler, the rules beyond its policy, the
//! history to start from) and what it gives back.

use crate::Request;
use crate::engine::{EngineConfig, RunStats};
use xsched_llm_core::{EngineOrder, Fairness, Input, Placement, Router, ShedReason};

/// Engines behind the scheduler: how many, which router, where requests wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Engine instances.
    pub instances: usize,
    /// How an engine is picked.
    pub router: Router,
    /// Where requests wait.
    pub placement: Placement,
}

impl Cluster {
    /// One engine.
    pub const SINGLE: Cluster = Cluster {
        instances: 1,
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
    };
}

/// What a run's scheduler is told beyond its policy: classes and their rules, and whether it
/// learns each engine's concurrency (the gateway's classes file and `--learn-concurrency`; by
/// default every request is of the standard class and nothing is learned).
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Tenants' shares, the shedding of sheddable classes, and eviction for a higher class.
    pub fairness: Fairness,
    /// Learn each engine's concurrency from its throughput.
    pub learn_concurrency: bool,
    /// Each request's class, by id (beyond the list: 0, the standard class).
    pub classes: Vec<i32>,
    /// Each request's TTFT deadline in seconds, by id (beyond the list: none).
    pub ttft_slo: Vec<Option<f64>>,
    /// Each request's tenant, by id (beyond the list: 0).
    pub tenants: Vec<usize>,
    /// The queue's bound (`None`: unbounded).
    pub max_waiting: Option<usize>,
    /// What a driver sees of the engines from outside (scrapes of their metrics, transport
    /// failures, answers), each fed at its time as the gateway feeds it, sorted by time: the
    /// core's rules for saturation, staleness, silence and ejection run on them.
    pub outside: Vec<(f64, Input)>,
    /// An engine that hangs (`None`: none does).
    pub hang: Option<Hang>,
    /// Order at the engines (`--order-at engine`): each runs vLLM's `priority` policy and is
    /// sent every request at once with the scheduler's number (`None`: the scheduler's queue).
    pub engine_order: Option<EngineOrder>,
}

/// An engine that stops at a moment and never steps again, as a hung engine process does, and
/// how long its driver takes to notice (the gateway: its metrics unanswered that long).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hang {
    /// The engine.
    pub engine: usize,
    /// When it hangs (s).
    pub at: f64,
    /// How long after that the scheduler is told it does not answer (s).
    pub noticed_after: f64,
}

/// A run's outcome.
#[derive(Debug)]
pub struct SimRun {
    /// Every engine's completions, preemptions and steps together.
    pub stats: RunStats,
    /// Requests in the order the scheduler admitted them (first admissions only).
    pub admitted: Vec<usize>,
    /// Wall-clock nanoseconds the scheduler spent per request (its calls, not the predictor).
    pub scheduler_ns: Vec<u64>,
    /// Wall-clock nanoseconds of each prediction.
    pub predict_ns: Vec<u64>,
    /// Requests evicted for a higher class, in the order the scheduler evicted them.
    pub evicted: Vec<usize>,
    /// Requests taken back from an engine that stopped answering, in that order.
    pub reclaimed: Vec<usize>,
    /// Each learned concurrency the scheduler decided: when, for which engine, how many.
    pub limits: Vec<(f64, usize, usize)>,
    /// Each request's first decision, in the order they were made: the engine it was first
    /// admitted to, or why it was shed.
    pub decided: Vec<(usize, Result<usize, ShedReason>)>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scheduler refused its configuration.
    #[error(transparent)]
    Config(#[from] xsched_llm_core::SchedulerError),
}

/// The history predictor's entries where nobody says otherwise (`xsched llm --history`'s
/// default, and every replay's).
pub const DEFAULT_HISTORY: usize = 10_000;

/// Runs on one cluster of engines, with one predictor's history to start from.
#[derive(Clone, Copy)]
pub struct Runs<'a> {
    /// Each engine.
    pub cfg: &'a EngineConfig,
    /// How many, routed how.
    pub cluster: Cluster,
    /// The history predictor's entries.
    pub history: usize,
    /// What fills the history first.
    pub warm: &'a [Request],
}
