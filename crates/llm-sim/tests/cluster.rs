//! Engines behind one scheduler: one instance is the single engine exactly; every router and
//! placement completes every request deterministically; more engines serve a burst faster.

mod common;

use common::{mean_ttlt, run, run_on, staggered};
use xsched_llm_core::{Placement, Router};
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::sim::Cluster;

fn engine() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 8,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
}

fn cluster(instances: usize, router: Router, placement: Placement) -> Cluster {
    Cluster {
        instances,
        router,
        placement,
    }
}

const ROUTERS: [Router; 4] = [
    Router::RoundRobin,
    Router::LeastOutstanding,
    Router::KvScore,
    Router::CostAware,
];

#[test]
fn one_instance_is_the_single_engine() {
    let reqs = staggered(120, 0.05, 53);
    for name in ["fcfs", "sagesched", "fastserve"] {
        let alone = run(&engine(), name, &reqs);
        for placement in [Placement::WhenFree, Placement::AtArrival] {
            let one = run_on(
                &engine(),
                cluster(1, Router::RoundRobin, placement),
                name,
                &reqs,
            );
            assert_eq!(
                one.stats.outcomes, alone.stats.outcomes,
                "{name} {placement:?}"
            );
        }
    }
}

#[test]
fn every_router_and_placement_completes_every_request_deterministically() {
    let reqs = staggered(300, 0.01, 53);
    for router in ROUTERS {
        for placement in [Placement::WhenFree, Placement::AtArrival] {
            let c = cluster(4, router, placement);
            let a = run_on(&engine(), c, "sagesched", &reqs);
            assert_eq!(a.stats.outcomes.len(), reqs.len(), "{router} {placement:?}");
            assert_eq!(a.scheduler_ns.len(), reqs.len());
            let b = run_on(&engine(), c, "sagesched", &reqs);
            assert_eq!(a.stats.outcomes, b.stats.outcomes, "{router} {placement:?}");
        }
    }
}

#[test]
fn four_instances_serve_a_burst_in_under_half_the_mean_time_of_one() {
    let reqs = staggered(200, 0.0, 53);
    let one = run(&engine(), "fcfs", &reqs);
    let four = run_on(
        &engine(),
        cluster(4, Router::LeastOutstanding, Placement::AtArrival),
        "fcfs",
        &reqs,
    );
    assert!(mean_ttlt(&four.stats.outcomes) < 0.5 * mean_ttlt(&one.stats.outcomes));
}
