//! Ordering at the engine in the simulator: the engine runs vLLM's `priority` policy and the
//! scheduler sends it every request at once with its number (`--order-at engine`). Exact in
//! virtual time.

mod common;

use common::{policy, req};
use xsched_llm_core::EngineOrder;
use xsched_llm_sim::Request;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::sim::{Cluster, Rules, Runs, SimRun};

fn engine() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 4,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
}

fn simulate(name: &str, rules: &Rules, requests: &[Request]) -> SimRun {
    let runs = Runs {
        cfg: &engine(),
        cluster: Cluster::SINGLE,
        history: 100,
        warm: &[],
    };
    runs.simulate(policy(name), rules, requests)
        .expect("a valid run")
}

fn at_engine() -> Rules {
    Rules {
        engine_order: Some(EngineOrder::default()),
        ..Rules::default()
    }
}

/// 24 requests within 0.24 s, answers of three lengths in turn (600, 20, 200 tokens).
fn burst() -> Vec<Request> {
    let lengths = [600, 20, 200];
    (0..24)
        .map(|i| req(i, 0.01 * i as f64, 100, lengths[i % 3]))
        .collect()
}

fn mean_ttlt(run: &SimRun) -> f64 {
    let o = &run.stats.outcomes;
    o.iter().map(|o| o.ttlt).sum::<f64>() / o.len() as f64
}

#[test]
fn sagesched_in_the_engines_queue_gains_on_a_burst_as_it_does_in_the_gateways() {
    let requests = burst();
    let fcfs = simulate("fcfs", &Rules::default(), &requests);
    let fcfs_engine = simulate("fcfs", &at_engine(), &requests);
    let gateway = simulate("sagesched-oracle", &Rules::default(), &requests);
    let engine = simulate("sagesched-oracle", &at_engine(), &requests);
    for run in [&fcfs, &fcfs_engine, &gateway, &engine] {
        assert_eq!(run.stats.outcomes.len(), 24);
    }
    let (f, fe, g, e) = (
        mean_ttlt(&fcfs),
        mean_ttlt(&fcfs_engine),
        mean_ttlt(&gateway),
        mean_ttlt(&engine),
    );
    // FCFS is FCFS wherever the queue is; the order gains in either place.
    assert!((fe / f - 1.0).abs() < 0.02, "fcfs {f} at the engine {fe}");
    assert!(e < 0.8 * f, "fcfs {f}, sagesched at the engine {e}");
    assert!((e / g - 1.0).abs() < 0.1, "gateway {g}, engine {e}");
    // Every request was sent on arrival.
    assert_eq!(engine.admitted, (0..24).collect::<Vec<_>>());
}

#[test]
fn a_long_answer_is_passed_only_by_arrivals_within_the_horizon() {
    // Four long answers fill the engine, a fifth waits, and short ones arrive faster than the
    // engine serves them for 40 s.
    let mut requests: Vec<Request> = (0..5).map(|i| req(i, 0.001 * i as f64, 100, 400)).collect();
    requests.extend((5..2005).map(|i| req(i, 0.02 * i as f64, 100, 60)));
    let run = |horizon_s| {
        let rules = Rules {
            engine_order: Some(EngineOrder {
                holds: 10_000,
                horizon_s,
            }),
            ..Rules::default()
        };
        let run = simulate("sagesched-oracle", &rules, &requests);
        let o = run
            .stats
            .outcomes
            .iter()
            .find(|o| o.id == 4)
            .map(|o| o.ttft);
        o.expect("answered")
    };
    let (aged, starved) = (run(2.0), run(1e6));
    // Aged: passed by the short answers arriving within 2 × (0.55 − 0.07) s of it (its place
    // and theirs against the reference), about 45, served four at a time after the long ones
    // ahead (6.7 s). Without aging, by every short answer of the run.
    assert!(aged < 20.0, "aged {aged} s");
    assert!(starved > 10.0 * aged, "starved {starved} s, aged {aged} s");
}

#[test]
fn a_higher_class_goes_first_in_the_engines_queue() {
    let mut requests: Vec<Request> = (0..12).map(|i| req(i, 0.0, 100, 300)).collect();
    requests.push(req(12, 0.1, 100, 300));
    let mut classes = vec![0; 12];
    classes.push(5);
    let rules = Rules {
        classes,
        ..at_engine()
    };
    let run = simulate("fcfs", &rules, &requests);
    let ttft = |id| {
        run.stats
            .outcomes
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.ttft)
    };
    let high = ttft(12).expect("answered");
    // It starts in the first slot that frees, before the 8 standard requests still waiting.
    let waiting_started_after = (4..12).filter_map(ttft).filter(|&t| t > high).count();
    assert_eq!(waiting_started_after, 8);
}
