//! The gateway's two engine-side rules run in the simulator, through the core code the gateway
//! runs: eviction for a higher class (a critical request arriving into an engine full of
//! sheddable streams) and learned concurrency (converging on a simulated engine whose
//! throughput stops growing). Exact in virtual time.

mod common;

use common::{policy, req};
use xsched_llm_core::{Eviction, Fairness};
use xsched_llm_sim::Request;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::sim::{Cluster, Rules, Runs, SimRun};

fn engine(max_num_seqs: usize) -> EngineConfig {
    EngineConfig {
        max_num_seqs,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
}

/// Two engines of `cfg`, routed round robin, sharing one queue.
fn two_round_robin(cfg: &EngineConfig) -> Runs<'_> {
    use xsched_llm_core::{Placement, Router};
    Runs {
        cfg,
        cluster: Cluster {
            instances: 2,
            router: Router::RoundRobin,
            placement: Placement::WhenFree,
        },
        history: 100,
        warm: &[],
    }
}

fn simulate(cfg: &EngineConfig, rules: &Rules, requests: &[Request]) -> SimRun {
    let runs = Runs {
        cfg,
        cluster: Cluster::SINGLE,
        history: 100,
        warm: &[],
    };
    runs.simulate(policy("fcfs"), rules, requests)
        .expect("a valid run")
}

/// Sixteen sheddable streams of 2 000 tokens fill an engine of 4 slots from t = 0; at t = 5 s a
/// critical request of 20 tokens arrives. Its TTFT and the run, under `eviction`.
fn flood(eviction: Eviction) -> (f64, SimRun) {
    let mut requests: Vec<Request> = (0..16)
        .map(|i| req(i, 0.01 * i as f64, 200, 2000))
        .collect();
    requests.push(req(16, 5.0, 200, 20));
    let mut classes = vec![-1; 16];
    classes.push(100);
    let rules = Rules {
        fairness: Fairness::with_eviction(eviction),
        classes,
        ..Rules::default()
    };
    let run = simulate(&engine(4), &rules, &requests);
    let critical = run.stats.outcomes.iter().find(|o| o.id == 16);
    (
        critical.expect("the critical request is answered").ttft,
        run,
    )
}

#[test]
fn a_critical_request_arriving_into_a_sheddable_flood_evicts_one_and_starts_at_once() {
    let (waited, kept) = flood(Eviction::None);
    let (evicting, one) = flood(Eviction::One);
    let (_, all) = flood(Eviction::All);
    // Without eviction it waits for a 2 000-token stream to end; with it, one prefill step.
    assert!(waited > 10.0, "without eviction: {waited} s");
    assert!(evicting < 0.2, "evicting one: {evicting} s");
    assert_eq!(kept.evicted, Vec::<usize>::new());
    // The sheddable request admitted last of the four running; all four under `all`.
    assert_eq!(one.evicted, [3]);
    assert_eq!(all.evicted, [3, 2, 1, 0]);
    assert_eq!((one.stats.evicted, all.stats.evicted), (1, 4));
    // Every request not evicted is answered.
    assert_eq!(one.stats.outcomes.len(), 16);
    assert_eq!(all.stats.outcomes.len(), 13);
}

#[test]
fn with_a_ttft_deadline_the_critical_request_evicts_only_when_its_guard_comes() {
    let mut requests: Vec<Request> = (0..4).map(|i| req(i, 0.0, 200, 2000)).collect();
    requests.push(req(4, 5.0, 200, 20));
    let rules = Rules {
        fairness: Fairness::with_eviction(Eviction::One),
        classes: vec![-1, -1, -1, -1, 100],
        ttft_slo: vec![None, None, None, None, Some(2.0)],
        ..Rules::default()
    };
    let run = simulate(&engine(4), &rules, &requests);
    let critical = run
        .stats
        .outcomes
        .iter()
        .find(|o| o.id == 4)
        .expect("answered");
    assert_eq!(run.evicted, [3]);
    // The simulator's service model knows its first token's time alone: its guard comes that
    // long before its 2 s deadline, so it waits out its slack and starts about at the deadline
    // (within the step the engine was in).
    assert!(
        critical.ttft > 1.9 && critical.ttft < 2.1,
        "TTFT {} s: evicted at its guard",
        critical.ttft
    );
}

#[test]
fn learned_concurrency_converges_where_a_simulated_engines_throughput_stops_growing() {
    // A step costs 1 ms plus 5 ms per decoding request: output tokens a second at n at once are
    // n / (1 + 5n) ms: 167, 182, 188, 190, … 195 at 8. Three is the fewest within 5 % of the best.
    let cfg = EngineConfig {
        beta_us: [1000.0, 0.0, 5000.0],
        attend_us: 0.0,
        ..engine(8)
    };
    let requests: Vec<Request> = (0..2000).map(|i| req(i, 0.0, 10, 50)).collect();
    let rules = Rules {
        learn_concurrency: true,
        ..Rules::default()
    };
    let run = simulate(&cfg, &rules, &requests);
    assert_eq!(run.stats.outcomes.len(), 2000);
    let (first, _, _) = run.limits.first().copied().expect("it learned");
    assert!(first > 0.0);
    // Where it spent the second half of the run (it leaves now and then to measure a
    // neighbour).
    let end = run.stats.makespan;
    let mut at = [0.0; 9];
    let mut level = (end / 2.0, 8);
    for &(t, _, n) in &run.limits {
        if t > level.0 {
            at[level.1] += t - level.0;
            level.0 = t;
        }
        level.1 = n;
    }
    at[level.1] += end - level.0;
    let most = (1..9)
        .max_by(|&a, &b| at[a].total_cmp(&at[b]))
        .expect("levels");
    assert_eq!(most, 3, "time at each level in the second half: {at:?}");
    // Without learning, nothing is decided.
    let fixed = simulate(&cfg, &Rules::default(), &requests);
    assert!(fixed.limits.is_empty());
}

#[test]
fn requests_on_an_engine_that_hangs_are_answered_by_the_other_within_seconds() {
    use xsched_llm_sim::sim::Hang;
    // Engine 1 accepts requests and never runs them; it is noticed 3 s on (the gateway's
    // metrics unanswered that long). Twenty short requests arrive 0.1 s apart, every other one
    // routed to the silent engine until then.
    let requests: Vec<Request> = (0..20).map(|i| req(i, 0.1 * i as f64, 10, 20)).collect();
    let rules = Rules {
        hang: Some(Hang {
            engine: 1,
            at: 0.0,
            noticed_after: 3.0,
        }),
        ..Rules::default()
    };
    let cfg = engine(4);
    let runs = two_round_robin(&cfg);
    let run = runs
        .simulate(policy("fcfs"), &rules, &requests)
        .expect("a valid run");
    assert_eq!(run.stats.outcomes.len(), 20, "every request answered");
    assert!(run.reclaimed.len() >= 4, "taken back: {:?}", run.reclaimed);
    for o in &run.stats.outcomes {
        let answered_at = requests[o.id].arrival + o.ttlt;
        assert!(
            answered_at < 5.0,
            "request {} answered at {answered_at} s",
            o.id
        );
    }
    // Without noticing, those sent to the silent engine are never answered.
    let unnoticed = Rules {
        hang: Some(Hang {
            noticed_after: f64::INFINITY,
            ..rules.hang.expect("a hang")
        }),
        ..Rules::default()
    };
    let stuck = runs
        .simulate(policy("fcfs"), &unnoticed, &requests)
        .expect("a valid run");
    assert!(
        stuck.stats.outcomes.len() <= 16,
        "{}",
        stuck.stats.outcomes.len()
    );
}

#[test]
fn an_engine_that_failed_is_sent_nothing_for_its_backoff_then_gets_requests_again() {
    use xsched_llm_core::Input;
    use xsched_llm_core::watch::FIRST_EJECTION_S;
    // A request to engine 0 failed at 0.05 s (as the gateway reports a refused connection):
    // the core ejects it for its first backoff; the requests arriving 0.1 s apart go to engine
    // 1 until then, and round robin over both after.
    let requests: Vec<Request> = (0..20).map(|i| req(i, 0.1 * i as f64, 10, 5)).collect();
    let rules = Rules {
        outside: vec![(0.05, Input::Failed { engine: 0 })],
        ..Rules::default()
    };
    let cfg = engine(8);
    let runs = two_round_robin(&cfg);
    let run = runs
        .simulate(policy("fcfs"), &rules, &requests)
        .expect("a valid run");
    let back_at = 0.05 + FIRST_EJECTION_S;
    for &(i, decided) in &run.decided {
        let at = requests[i].arrival;
        let engine = decided.expect("admitted");
        if at > 0.05 && at < back_at {
            assert_eq!(engine, 1, "request {i} at {at} s");
        }
    }
    let after: Vec<usize> = (run.decided.iter())
        .filter(|(i, _)| requests[*i].arrival >= back_at)
        .filter_map(|(_, d)| d.ok())
        .collect();
    assert!(after.contains(&0) && after.contains(&1), "{after:?}");
}
