//! Engines behind a router: one instance is the single engine exactly; every router completes
//! every request; the router's queue and SageSched placement behave as documented.

use xsched_llm::Request;
use xsched_llm::cluster::{self, Cluster, Ordering, ROUTERS};
use xsched_llm::embedding::{Embedder, Hashed};
use xsched_llm::engine::{EngineConfig, simulate};
use xsched_llm::policy;

fn engine() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 8,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
}

fn requests(n: usize, gap: f64) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let k = i as u32;
            let prompt = format!("prompt {}", i % 13);
            Request {
                id: i,
                arrival: i as f64 * gap,
                embedding: Hashed.embed(&prompt),
                prompt,
                input_tokens: 20 + (k * 37) % 400,
                output_tokens: 2 + (k * 53) % 300,
                previous_answer_tokens: None,
            }
        })
        .collect()
}

fn cluster(instances: usize, router: &str, ordering: Ordering) -> Cluster {
    Cluster {
        instances,
        router: router.into(),
        ordering,
    }
}

fn mean_ttlt(outcomes: &[xsched_llm::engine::Outcome]) -> f64 {
    outcomes.iter().map(|o| o.ttlt).sum::<f64>() / outcomes.len() as f64
}

#[test]
fn one_instance_is_the_single_engine() {
    let (cfg, reqs) = (engine(), requests(120, 0.05));
    for name in ["fcfs", "sagesched"] {
        let mut p = policy::by_name(name, 100, &cfg).expect("policy");
        let alone = simulate(&cfg, &reqs, p.as_mut());
        let run = cluster::simulate(
            &cfg,
            &cluster(1, "round-robin", Ordering::Instance),
            name,
            100,
            &[],
            &reqs,
        )
        .expect("cluster");
        assert_eq!(run.stats.outcomes, alone.outcomes, "{name}");
        assert_eq!(run.decision_ns.len(), reqs.len());
    }
}

#[test]
fn every_router_and_ordering_completes_every_request_deterministically() {
    let (cfg, reqs) = (engine(), requests(300, 0.01));
    for router in ROUTERS {
        for ordering in [Ordering::Instance, Ordering::Router] {
            let c = cluster(4, router, ordering);
            let run = || cluster::simulate(&cfg, &c, "sagesched", 100, &reqs[..20], &reqs);
            let a = run().expect("cluster");
            assert_eq!(a.stats.outcomes.len(), reqs.len(), "{router} {ordering:?}");
            assert_eq!(a.decision_ns.len(), reqs.len(), "{router} {ordering:?}");
            assert_eq!(a.stats.outcomes, run().expect("again").stats.outcomes);
        }
    }
    assert!(
        cluster::simulate(
            &cfg,
            &cluster(2, "random", Ordering::Instance),
            "fcfs",
            1,
            &[],
            &reqs
        )
        .is_none()
    );
}

#[test]
fn four_instances_serve_a_burst_in_under_half_the_mean_time_of_one() {
    let (cfg, reqs) = (engine(), requests(200, 0.0));
    let one = cluster::simulate(
        &cfg,
        &cluster(1, "round-robin", Ordering::Instance),
        "fcfs",
        1,
        &[],
        &reqs,
    )
    .expect("one");
    let four = cluster::simulate(
        &cfg,
        &cluster(4, "least-outstanding", Ordering::Instance),
        "fcfs",
        1,
        &[],
        &reqs,
    )
    .expect("four");
    assert!(mean_ttlt(&four.stats.outcomes) < 0.5 * mean_ttlt(&one.stats.outcomes));
}
