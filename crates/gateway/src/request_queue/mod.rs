//! The gateway as a driver of the scheduling core (`xsched-llm-core`): the
//! [`RequestScheduler`](xsched_llm_core::RequestScheduler) under a lock, fed the gateway's events
//! with the time since it started, and a waiter per queued request that its admission wakes. The
//! core owns every decision (the queue, the order, the aging guard, the engines' slots and learned
//! limits, the router, eviction for a higher class, taking requests back from a silent engine);
//! this module owns only what is async: a request waits here until the core admits it (firing the
//! core's timers while it waits), then holds a [`Slot`] until its answer ends or its client goes
//! away, and dropping the slot tells the core, which admits the next. What the core does to an
//! admitted request on its engine reaches the request's handler as [`Taken`].
//!
//! A wait that is given up (its client went away) tells the core the request is done, which
//! takes it out of the queue, or, if it was admitted in that instant, frees its slot: nothing
//! leaks either way.

mod admit;
mod outcome;
mod queue;
mod slot;
mod state;

pub use outcome::{RequestRefused, Taken};
pub use queue::RequestQueue;
pub use slot::Slot;

#[cfg(test)]
use std::sync::Arc;
#[cfg(test)]
use xsched_llm_core::{Arrival, Config};

/// An admission for `policy` over `upstreams` alike (the gateway's own configuration), for
/// tests.
#[cfg(test)]
pub(crate) fn for_tests(
    policy: &str,
    upstreams: usize,
    concurrency: usize,
    max_waiting: usize,
) -> Arc<RequestQueue> {
    use xsched_llm_core::service::{Rates, ServiceModel};
    use xsched_llm_core::{EngineLimits, Placement, RequestPolicySpec, Router};
    RequestQueue::new(Config {
        policy: policy.parse::<RequestPolicySpec>().expect("policy"),
        engines: vec![
            EngineLimits {
                concurrency,
                kv_tokens: None,
                block_tokens: 16,
            };
            upstreams
        ],
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting,
        service: ServiceModel::Measured(Rates::default()),
        can_pause: false,
        knows_truth: false,
        fairness: xsched_llm_core::Fairness::default(),
        learn_concurrency: false,
        engine_order: None,
    })
    .expect("valid")
}

/// A request predicted to answer `tokens` tokens, for tests.
#[cfg(test)]
pub(crate) fn arrival_for_tests(tokens: f64) -> Arrival {
    Arrival {
        id: 0,
        input_tokens: 10,
        max_tokens: None,
        priority: 0,
        tenant: 0,
        lengths: xsched_llm_core::SizeDistribution::point(tokens),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
