//! What the core's tests share: a configuration as the gateway's (one queue, measured service,
//! no pausing, no truth), which each test changes where it needs to.

#![allow(dead_code)]

use xsched_llm_core::service::{Rates, ServiceModel};
use xsched_llm_core::{
    Config, Decision, EngineLimits, Placement, RequestPolicySpec, RequestScheduler, Router,
};

/// FCFS over `engines` engines of `concurrency` slots each, routed round robin.
pub fn round_robin(engines: usize, concurrency: usize) -> RequestScheduler {
    RequestScheduler::new(Config {
        router: Router::RoundRobin,
        ..config("fcfs", engines, concurrency)
    })
    .expect("valid")
}

/// Every decision since the last look.
pub fn decisions(s: &mut RequestScheduler) -> Vec<Decision> {
    std::iter::from_fn(|| s.poll_decision()).collect()
}

/// `policy` over `engines` engines of `concurrency` slots each, at most 1 000 waiting.
pub fn config(policy: &str, engines: usize, concurrency: usize) -> Config {
    Config {
        policy: policy.parse::<RequestPolicySpec>().expect("policy"),
        engines: vec![
            EngineLimits {
                concurrency,
                kv_tokens: None,
                block_tokens: 16,
            };
            engines
        ],
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting: 1000,
        service: ServiceModel::Measured(Rates::default()),
        can_pause: false,
        knows_truth: false,
        fairness: Default::default(),
        learn_concurrency: false,
        engine_order: None,
    }
}

/// The requests admitted since the last look.
pub fn admitted(s: &mut RequestScheduler) -> Vec<u64> {
    std::iter::from_fn(|| s.poll_decision())
        .filter_map(|d| match d {
            Decision::Admit { id, .. } => Some(id),
            _ => None,
        })
        .collect()
}
