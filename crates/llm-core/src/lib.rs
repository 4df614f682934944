//! # xsched-llm-core
//!
//! LLM request scheduling without I/O: one state machine that owns the waiting queue and its
//! orderings, the aging guard, admission to engines (their slots and their KV memory), and the
//! routers. It takes `(now, input)` and returns decisions (admit R to engine E, pause R, shed R),
//! never reading a clock, so the same code runs under the engine simulator (`xsched-llm`, in
//! virtual time) and the gateway (`xsched-gateway`, in front of real engines): a simulated
//! result is evidence about the scheduler users deploy, as the XQueue core's is.
//!
//! ```
//! use xsched_llm_core::{Arrival, Config, Decision, EngineLimits, Input, Placement, RequestScheduler};
//! use xsched_llm_core::{Router, service::{Rates, ServiceModel}};
//!
//! let mut s = RequestScheduler::new(Config {
//!     policy: "sagesched".parse().expect("a known policy"),
//!     engines: vec![EngineLimits { concurrency: 1, kv_tokens: None, block_tokens: 16 }],
//!     router: Router::LeastOutstanding,
//!     placement: Placement::WhenFree,
//!     max_waiting: 100,
//!     service: ServiceModel::Measured(Rates::default()),
//!     can_pause: false,
//!     knows_truth: true,
//!     fairness: Default::default(),
//!     learn_concurrency: false,
//!     engine_order: None,
//! })
//! .expect("valid");
//! let arrive = |id| Input::Arrived(Arrival { id, input_tokens: 10, ..Default::default() });
//! s.handle(0.0, arrive(1)).expect("new");
//! assert_eq!(s.poll_decision(), Some(Decision::Admit { id: 1, engine: 0 }));
//! s.handle(0.1, arrive(2)).expect("new");
//! assert_eq!(s.poll_decision(), None, "the one slot is taken");
//! s.handle(0.5, Input::Done { id: 1 }).expect("known");
//! assert_eq!(s.poll_decision(), Some(Decision::Admit { id: 2, engine: 0 }));
//! ```
//!
//! - [`policy`]: the policies by name, typed ([`RequestPolicySpec`]).
//! - [`order`]: ranks (lower first) and what a preemptive order may pause.
//! - [`admit`]: expected-peak admission into KV memory, and its learned headroom.
//! - [`lanes`]: priority classes and tenants' fair shares (VTC) in the waiting queue.
//! - [`learn`]: each engine's concurrency, learned from its throughput.
//! - [`route`]: the routers.
//! - [`prefix`]: what prompt prefixes each engine was sent (the `prefix-affinity` router).
//! - [`predict`]: the predictor interface (features in, an output-length distribution out).
//! - [`service`]: service times from a step-time fit or measured from answers.
//! - [`gittins`]: the Gittins index of a size distribution (SageSched's ordering).
//! - [`cost`]: SageSched's cost `O²/2 + I·O` and the step-time fit.
//! - [`watch`]: engines seen from outside: saturated, stale, silent, ejected.
//!
//! # Errors
//!
//! One error, [`SchedulerError`], with `Clone` and `PartialEq` (drivers compare it and keep
//! it): a configuration [`RequestScheduler::new`] refuses, an eviction rule's unknown name, an
//! input [`RequestScheduler::handle`] refuses, or a request an oracle cannot order
//! ([`RequestPolicySpec::stated_lengths`]). Two `FromStr` errors stay types of their own, read
//! by clap's value parsers and `parse()`: [`policy::PolicyError`] (a policy's name or parameter,
//! also from [`policy::parse_list`]) and [`route::UnknownRouter`]. Each message lists the names
//! its module's table knows; folded into `SchedulerError`, the error would read those tables
//! while the tables' modules name the error, an import circle (`scripts/import-circles.py`).

pub mod admit;
pub mod cost;
mod error;
pub mod gittins;
mod job;
pub mod lanes;
pub mod learn;
pub mod order;
pub mod policy;
pub mod predict;
pub mod prefix;
mod queue;
pub mod route;
mod sched;
pub mod service;
pub mod watch;

pub use error::{SchedulerError, chain_text};
pub use gittins::SizeDistribution;
pub use policy::{KvAdmission, Order, PredictionSource, RequestPolicySpec, Size};
pub use route::Router;
pub use sched::{
    AGING_FACTOR, Arrival, CLASS_LIMIT, CLASS_SPAN_MS, Config, Decision, EngineLimits, EngineOrder,
    EngineReport, EvictReason, Eviction, Fairness, HIGH_CLASS_WINDOW, Input, Placement,
    RequestScheduler, ShedReason, engine_priority,
};
