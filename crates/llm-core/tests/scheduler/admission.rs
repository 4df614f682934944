//! What is admitted and what is refused: the queue's bound, requests gone while waiting, an
//! engine's step budget and KV blocks, expected-peak admission, degenerate requests, bad inputs
//! and configurations, and slots never exceeded whatever arrives.

use crate::{admitted, arrival, config, decisions, limits, scheduler, served};
use proptest::prelude::*;
use xsched_llm_core::{
    Arrival, Config, Decision, EngineReport, Input, RequestPolicySpec, RequestScheduler,
    SchedulerError, ShedReason, SizeDistribution,
};

#[test]
fn past_its_bound_the_queue_sheds_the_newcomer() {
    let mut s = RequestScheduler::new(Config {
        max_waiting: 2,
        ..config("fcfs", vec![limits(1, None)])
    })
    .expect("valid");
    for id in 0..4 {
        s.handle(0.0, arrival(id, 10, 10.0)).expect("new");
    }
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Admit { id: 0, engine: 0 },
            Decision::Shed {
                id: 3,
                reason: ShedReason::QueueFull
            }
        ]
    );
    assert_eq!(s.waiting(), 2);
}

#[test]
fn a_request_gone_while_waiting_leaves_the_queue_and_takes_no_slot() {
    let mut s = scheduler("fcfs", 1);
    for id in 0..3 {
        s.handle(0.0, arrival(id, 10, 10.0)).expect("new");
    }
    decisions(&mut s);
    s.handle(0.5, Input::Done { id: 1 }).expect("gone");
    assert_eq!(s.waiting(), 1);
    s.handle(1.0, Input::Done { id: 0 }).expect("done");
    assert_eq!(admitted(&mut s), [2]);
    // Unknown ids change nothing.
    s.handle(2.0, Input::Done { id: 99 }).expect("ignored");
    s.handle(
        2.0,
        Input::Progress {
            id: 99,
            generated: 3,
        },
    )
    .expect("ignored");
    assert_eq!((s.waiting(), s.outstanding(0)), (0, 1));
}

#[test]
fn an_engine_report_bounds_what_starts_in_its_next_step() {
    let mut s = scheduler("fcfs", 8);
    let report = |tokens, free| Input::Engine {
        engine: 0,
        report: EngineReport {
            step_tokens: Some(tokens),
            kv_free_tokens: Some(free),
            waiting: 0,
            slots: None,
        },
    };
    s.handle(0.0, report(250, 10_000)).expect("engine");
    for id in 0..3 {
        s.handle(0.0, arrival(id, 100, 10.0)).expect("new");
    }
    // 100 + 100 + the third's first 50-token chunk; nothing after: the budget is spent.
    assert_eq!(admitted(&mut s), [0, 1, 2]);
    s.handle(0.0, arrival(3, 100, 10.0)).expect("new");
    assert_eq!(admitted(&mut s), Vec::<u64>::new());
    // Blocks for the first chunk must be free: 100 tokens need 112 (7 blocks).
    s.handle(0.1, report(2048, 100)).expect("engine");
    assert_eq!(admitted(&mut s), Vec::<u64>::new());
    s.handle(0.2, report(2048, 112)).expect("engine");
    assert_eq!(admitted(&mut s), [3]);
}

#[test]
fn expected_peak_admission_holds_what_would_overflow_and_learns_from_preemptions() {
    // 1 000 tokens of KV; each request 100 + 300 tokens at its end.
    let mut s =
        RequestScheduler::new(config("sagesched", vec![limits(16, Some(1000))])).expect("valid");
    for id in 0..4 {
        s.handle(0.0, arrival(id, 100, 300.0)).expect("new");
    }
    assert_eq!(
        admitted(&mut s),
        [0, 1],
        "a third would peak at 3 x 400 tokens"
    );
    // Far enough along that a third's growth fits beside theirs: 2 x 399 + (100 + 300 - 250).
    for id in [0, 1] {
        s.handle(1.0, Input::Progress { id, generated: 250 })
            .expect("known");
    }
    s.handle(1.0, Input::Done { id: 99 }).expect("a round");
    assert_eq!(admitted(&mut s), [2]);
    assert_eq!(s.headroom(0), 1.0);
    s.handle(1.1, Input::Preempted { id: 2 }).expect("known");
    assert!(s.headroom(0) < 1.0, "a preemption tightens admission");
    // The same order under the engine's admission takes all four at once.
    let mut engine = RequestScheduler::new(config(
        "sagesched:admit=engine",
        vec![limits(16, Some(1000))],
    ))
    .expect("valid");
    for id in 0..4 {
        engine.handle(0.0, arrival(id, 100, 300.0)).expect("new");
    }
    assert_eq!(admitted(&mut engine), [0, 1, 2, 3]);
}

#[test]
fn admission_never_panics_on_degenerate_requests() {
    // Zero- and one-token answers, no prediction (the prior), a prompt beyond the KV pool.
    let mut s =
        RequestScheduler::new(config("sagesched", vec![limits(4, Some(1000))])).expect("valid");
    let inputs = [
        Input::Arrived(Arrival {
            id: 0,
            input_tokens: 5000,
            max_tokens: Some(0),
            priority: i32::MIN,
            tenant: 0,
            lengths: None,
            ..Default::default()
        }),
        arrival(1, 0, 1.0),
        Input::Arrived(Arrival {
            id: 2,
            input_tokens: u32::MAX,
            max_tokens: Some(1),
            priority: i32::MAX,
            tenant: 0,
            lengths: SizeDistribution::point(f64::MAX),
            ..Default::default()
        }),
    ];
    for input in inputs {
        s.handle(0.0, input).expect("new");
    }
    assert_eq!(
        admitted(&mut s),
        [0],
        "an engine with nothing admitted takes the next"
    );
    for id in 0..3 {
        s.handle(
            1.0,
            Input::Progress {
                id,
                generated: u32::MAX,
            },
        )
        .expect("known");
        s.handle(1.0, Input::Done { id }).expect("known");
    }
    // Request 2's class (i32::MAX) goes first; request 1, still waiting, left by its Done.
    assert_eq!(admitted(&mut s), [2]);
    assert_eq!(s.waiting(), 0);
    s.handle(2.0, served(0, 0, f64::NAN, Some(f64::INFINITY)))
        .expect("ignored");
    s.handle(3.0, arrival(3, 10, 1.0)).expect("new");
    assert_eq!(admitted(&mut s), [3]);
}

#[test]
fn bad_inputs_and_configurations_are_refused_with_what_is_wrong() {
    let mut s = scheduler("fcfs", 1);
    s.handle(0.0, arrival(1, 10, 10.0)).expect("new");
    assert_eq!(
        s.handle(0.0, arrival(1, 10, 10.0)),
        Err(SchedulerError::Duplicate(1))
    );
    let report = Input::Engine {
        engine: 7,
        report: EngineReport::default(),
    };
    assert_eq!(s.handle(0.0, report), Err(SchedulerError::UnknownEngine(7)));
    assert_eq!(
        RequestScheduler::new(config("fcfs", vec![])).err(),
        Some(SchedulerError::NoEngine)
    );
    assert!(matches!(
        RequestScheduler::new(config("fcfs", vec![limits(0, None)])).err(),
        Some(SchedulerError::Zero(_))
    ));
    let gateway = |policy| Config {
        can_pause: false,
        knows_truth: false,
        ..config(policy, vec![limits(1, None)])
    };
    let err = RequestScheduler::new(gateway("fastserve")).expect_err("cannot pause");
    assert!(err.to_string().contains("fastserve:preempt=off"), "{err}");
    let err = RequestScheduler::new(gateway("sagesched-noise-0.5")).expect_err("no truth");
    assert!(err.to_string().contains("noisy samples"), "{err}");
    // The oracles take the length a request states, and refuse one that states none.
    let oracle: RequestPolicySpec = "srpt-oracle".parse().expect("policy");
    assert!(RequestScheduler::new(gateway("srpt-oracle")).is_ok());
    assert_eq!(
        oracle.stated_lengths(Some(40)).expect("stated"),
        SizeDistribution::point(40.0)
    );
    let err = oracle
        .stated_lengths(None)
        .expect_err("none stated")
        .to_string();
    assert!(err.contains("ignore_eos"), "{err}");
    let fcfs: RequestPolicySpec = "fcfs".parse().expect("policy");
    assert_eq!(fcfs.stated_lengths(None), Ok(None));
}

proptest! {
    /// Whatever arrives and leaves, every request is admitted at most once per wait, never
    /// beyond an engine's slots, and FCFS admits in arrival order.
    #[test]
    fn admissions_respect_slots_and_fcfs_keeps_arrival_order(
        events in proptest::collection::vec((0u8..3, 1u32..500, 1u32..500), 1..200),
        engines in 1usize..4,
        concurrency in 1usize..4,
    ) {
        let mut s = RequestScheduler::new(config("fcfs", vec![limits(concurrency, None); engines])).expect("valid");
        let (mut next, mut running, mut order) = (0u64, Vec::new(), Vec::new());
        for (k, (kind, input, output)) in events.into_iter().enumerate() {
            let now = k as f64;
            match kind {
                0 | 1 => {
                    s.handle(now, arrival(next, input, f64::from(output))).expect("new");
                    next += 1;
                }
                _ => {
                    if !running.is_empty() {
                        let id: u64 = running.remove(usize::try_from(input).unwrap_or(0) % running.len());
                        s.handle(now, Input::Done { id }).expect("known");
                    }
                }
            }
            for d in decisions(&mut s) {
                if let Decision::Admit { id, engine } = d {
                    prop_assert!(engine < engines);
                    prop_assert!(!order.contains(&id));
                    running.push(id);
                    order.push(id);
                }
            }
            prop_assert!((0..engines).all(|e| s.outstanding(e) <= concurrency));
            prop_assert_eq!(running.len(), (0..engines).map(|e| s.outstanding(e)).sum::<usize>());
        }
        let mut sorted = order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(order, sorted);
    }
}
