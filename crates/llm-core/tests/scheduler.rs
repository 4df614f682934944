//! The scheduler as a state machine: inputs in, decisions out, exact in virtual time.

use proptest::prelude::*;
use xsched_llm_core::service::{Rates, Served, ServiceModel};
use xsched_llm_core::{
    Arrival, Config, ConfigError, Decision, EngineLimits, EngineReport, EvictReason, Input,
    InputError, Placement, RequestPolicySpec, RequestScheduler, Router, ShedReason,
    SizeDistribution,
};

fn limits(concurrency: usize, kv_tokens: Option<u64>) -> EngineLimits {
    EngineLimits {
        concurrency,
        kv_tokens,
        block_tokens: 16,
    }
}

fn config(policy: &str, engines: Vec<EngineLimits>) -> Config {
    Config {
        policy: policy.parse::<RequestPolicySpec>().expect("policy"),
        engines,
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting: 1000,
        service: ServiceModel::Measured(Rates::default()),
        can_pause: true,
        knows_truth: true,
        fairness: xsched_llm_core::Fairness::default(),
        learn_concurrency: false,
        engine_order: None,
    }
}

fn scheduler(policy: &str, concurrency: usize) -> RequestScheduler {
    RequestScheduler::new(config(policy, vec![limits(concurrency, None)])).expect("valid")
}

/// A request of `input` prompt tokens predicted to answer exactly `tokens`.
fn arrival(id: u64, input: u32, tokens: f64) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: input,
        max_tokens: None,
        priority: 0,
        tenant: 0,
        lengths: SizeDistribution::point(tokens),
        ..Default::default()
    })
}

/// An answer of `output` tokens after a `prompt`-token prompt, `total` seconds from admission
/// (its first token after `first`).
fn served(prompt: u32, output: u32, total: f64, first: Option<f64>) -> Input {
    Input::Served(Served {
        prompt_tokens: prompt,
        output_tokens: output,
        total_s: total,
        first_token_s: first,
    })
}

fn decisions(s: &mut RequestScheduler) -> Vec<Decision> {
    std::iter::from_fn(|| s.poll_decision()).collect()
}

fn admitted(s: &mut RequestScheduler) -> Vec<u64> {
    decisions(s)
        .into_iter()
        .filter_map(|d| match d {
            Decision::Admit { id, .. } => Some(id),
            _ => None,
        })
        .collect()
}

/// Hold the one slot with request 0, queue `rest`, then free slots one by one: the admission
/// order.
fn order_after(s: &mut RequestScheduler, rest: &[Input]) -> Vec<u64> {
    s.handle(0.0, arrival(0, 10, 10.0)).expect("new");
    assert_eq!(admitted(s), [0]);
    for a in rest {
        s.handle(0.0, a.clone()).expect("new");
    }
    let mut order = Vec::new();
    let mut running = 0;
    for k in 0..rest.len() {
        s.handle(1.0 + k as f64, Input::Done { id: running })
            .expect("known");
        let next = admitted(s);
        assert_eq!(next.len(), 1, "one slot frees, one request runs");
        running = next[0];
        order.push(running);
    }
    order
}

#[test]
fn fcfs_admits_in_arrival_order_and_sagesched_the_shortest_predicted_first() {
    let rest = [
        arrival(1, 10, 300.0),
        arrival(2, 10, 5.0),
        arrival(3, 10, 50.0),
    ];
    assert_eq!(order_after(&mut scheduler("fcfs", 1), &rest), [1, 2, 3]);
    assert_eq!(
        order_after(&mut scheduler("sagesched", 1), &rest),
        [2, 3, 1]
    );
    assert_eq!(order_after(&mut scheduler("ssjf", 1), &rest), [2, 3, 1]);
}

#[test]
fn the_cost_counts_the_prompt_too() {
    // Same answers, prompts of 5 000 and 10 tokens: O²/2 + I·O ranks the long prompt last.
    let rest = [arrival(1, 5000, 20.0), arrival(2, 10, 20.0)];
    assert_eq!(order_after(&mut scheduler("sagesched", 1), &rest), [2, 1]);
    assert_eq!(
        order_after(&mut scheduler("sagesched-length", 1), &rest),
        [1, 2]
    );
}

#[test]
fn sagesched_time_orders_by_measured_time_where_the_paper_cost_orders_by_output() {
    // A long answer to a short prompt (1 + 200 tokens) against a short answer to a long prompt
    // (2 000 + 8). The paper's cost: 200²/2 + 200 = 20 200 against 8²/2 + 16 000 = 16 032, so
    // the long prompt first. Measured on an engine where a prompt token costs as much as an
    // output token, the time is 201 against 2 008 units: the long answer first.
    let rest = [arrival(1, 1, 200.0), arrival(2, 2000, 8.0)];
    assert_eq!(order_after(&mut scheduler("sagesched", 1), &rest), [2, 1]);
    let mut timed = scheduler("sagesched-time", 1);
    for _ in 0..50 {
        timed
            .handle(0.0, served(100, 101, 0.2, Some(0.1)))
            .expect("learned");
    }
    assert_eq!(order_after(&mut timed, &rest), [1, 2]);
}

#[test]
fn priority_orders_higher_classes_first_then_by_arrival() {
    let with = |id, priority| {
        Input::Arrived(Arrival {
            id,
            input_tokens: 10,
            max_tokens: None,
            priority,
            tenant: 0,
            lengths: None,
            ..Default::default()
        })
    };
    let rest = [with(1, 0), with(2, 5), with(3, -1), with(4, 5)];
    assert_eq!(
        order_after(&mut scheduler("priority", 1), &rest),
        [2, 4, 1, 3]
    );
}

#[test]
fn an_aged_request_goes_before_shorter_ones() {
    let mut s = scheduler("sagesched", 1);
    for _ in 0..20 {
        // 10 ms of service per output token.
        s.handle(0.0, served(10, 100, 1.0, None)).expect("learned");
    }
    s.handle(0.0, arrival(0, 10, 10.0)).expect("new");
    // A 50-token request ages after 100 × 0.5 s = 50 s; the 5-token ones arrive later.
    s.handle(0.0, arrival(1, 10, 50.0)).expect("new");
    s.handle(60.0, arrival(2, 10, 5.0)).expect("new");
    s.handle(60.0, arrival(3, 10, 5.0)).expect("new");
    decisions(&mut s);
    s.handle(61.0, Input::Done { id: 0 }).expect("known");
    assert_eq!(admitted(&mut s), [1], "aged: before the shorter ones");
    let mut noaging = scheduler("sagesched-noaging", 1);
    let rest = [arrival(1, 10, 50.0), arrival(2, 10, 5.0)];
    assert_eq!(order_after(&mut noaging, &rest), [2, 1]);
}

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
fn routers_spread_requests_over_engines_with_free_slots() {
    let mut s = RequestScheduler::new(config("fcfs", vec![limits(2, None); 3])).expect("valid");
    for id in 0..6 {
        s.handle(0.0, arrival(id, 10, 10.0)).expect("new");
    }
    let engines: Vec<usize> = decisions(&mut s)
        .into_iter()
        .filter_map(|d| match d {
            Decision::Admit { engine, .. } => Some(engine),
            _ => None,
        })
        .collect();
    assert_eq!(
        engines,
        [0, 1, 2, 0, 1, 2],
        "least outstanding, ties to the first"
    );
    assert_eq!(
        (0..3).map(|e| s.outstanding(e)).collect::<Vec<_>>(),
        [2, 2, 2]
    );
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
        Err(InputError::Duplicate(1))
    );
    let report = Input::Engine {
        engine: 7,
        report: EngineReport::default(),
    };
    assert_eq!(s.handle(0.0, report), Err(InputError::NoEngine(7)));
    assert_eq!(
        RequestScheduler::new(config("fcfs", vec![])).err(),
        Some(ConfigError::NoEngine)
    );
    assert!(matches!(
        RequestScheduler::new(config("fcfs", vec![limits(0, None)])).err(),
        Some(ConfigError::Zero(_))
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

/// One engine of `concurrency` slots holding request 0 (predicted `first` tokens), then a new
/// request predicted `tokens` arrives: what is paused for it.
fn paused_for(policy: &str, first: f64, generated: u32, tokens: f64) -> Vec<Decision> {
    let mut s = scheduler(policy, 1);
    s.handle(0.0, arrival(0, 10, first)).expect("new");
    s.handle(0.5, Input::Progress { id: 0, generated })
        .expect("known");
    decisions(&mut s);
    s.handle(1.0, arrival(1, 10, tokens)).expect("new");
    decisions(&mut s)
}

#[test]
fn trail_pauses_a_request_only_while_it_is_below_its_limit() {
    let pause = [
        Decision::Evict {
            id: 0,
            engine: 0,
            reason: EvictReason::Paused,
        },
        Decision::Admit { id: 1, engine: 0 },
    ];
    // Predicted 100; a 5-token request arrives after 70 tokens (≤ 80): paused.
    assert_eq!(paused_for("trail", 100.0, 70, 5.0), pause);
    // After 81: past 0.8 of its prediction, it runs on.
    assert_eq!(paused_for("trail", 100.0, 81, 5.0), []);
    // Not for a request predicted to need more than it has left.
    assert_eq!(paused_for("trail", 100.0, 10, 500.0), []);
    // SSJF never pauses.
    assert_eq!(paused_for("ssjf", 100.0, 10, 5.0), []);
}

#[test]
fn fastserve_pauses_for_a_higher_level_and_resumes_the_paused_request_on_its_engine() {
    let fit = xsched_llm_core::cost::StepFit {
        beta_us: [10_000.0, 10.0, 1.0],
        attend_us: 0.0,
        chunk_tokens: 2048,
    };
    let mut s = RequestScheduler::new(Config {
        service: ServiceModel::Fit(fit),
        ..config("fastserve", vec![limits(1, None), limits(1, None)])
    })
    .expect("valid");
    s.handle(0.0, arrival(0, 10, 10.0)).expect("new");
    s.handle(0.0, arrival(1, 10, 10.0)).expect("new");
    decisions(&mut s);
    // Request 0 has had 50 steps (500 ms: level 6); 1 only 1 (level 1).
    s.handle(
        0.5,
        Input::Progress {
            id: 0,
            generated: 50,
        },
    )
    .expect("known");
    s.handle(
        0.5,
        Input::Progress {
            id: 1,
            generated: 1,
        },
    )
    .expect("known");
    s.handle(0.6, arrival(2, 10, 10.0)).expect("new");
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Evict {
                id: 0,
                engine: 0,
                reason: EvictReason::Paused,
            },
            Decision::Admit { id: 2, engine: 0 }
        ]
    );
    // The paused request waits for its own engine: engine 1 frees first, it stays queued.
    s.handle(0.7, Input::Done { id: 1 }).expect("known");
    assert_eq!(decisions(&mut s), []);
    s.handle(0.8, Input::Done { id: 2 }).expect("known");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 0, engine: 0 }]);
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

#[test]
fn without_pausing_the_index_of_the_whole_request_orders_by_expected_remaining_size() {
    // A: 1 or 1 000 tokens, evenly (expected cost 250 000); B: 300 tokens (45 000). Over every
    // quantum A's index is far higher (half the time it ends at once); over the whole request
    // it is 1 / E[S], and B goes first.
    let a = Input::Arrived(Arrival {
        id: 1,
        input_tokens: 0,
        max_tokens: None,
        priority: 0,
        tenant: 0,
        lengths: SizeDistribution::from_samples(&[1.0, 1000.0]),
        ..Default::default()
    });
    let rest = [a, arrival(2, 0, 300.0)];
    assert_eq!(order_after(&mut scheduler("sagesched", 1), &rest), [2, 1]);
    assert_eq!(
        order_after(&mut scheduler("sagesched-quanta", 1), &rest),
        [1, 2]
    );
    assert_eq!(
        order_after(&mut scheduler("sagesched:preempt=on", 1), &rest),
        [1, 2]
    );
}

#[test]
fn placed_on_arrival_the_cost_aware_router_counts_what_waits_at_each_engine() {
    let mut s = RequestScheduler::new(Config {
        router: Router::CostAware,
        placement: Placement::AtArrival,
        ..config("fcfs", vec![limits(1, None); 2])
    })
    .expect("valid");
    // Predicted costs: 1 000 tokens is 500 000; 10 tokens 50. The first heavy one goes to
    // engine 0 and runs; the second heavy one to engine 1; then the light ones to whichever
    // holds less predicted work, the queued heavy one included.
    let ids = [(0, 1000.0), (1, 1000.0), (2, 1000.0), (3, 10.0), (4, 10.0)];
    for (id, tokens) in ids {
        s.handle(0.0, arrival(id, 0, tokens)).expect("new");
    }
    decisions(&mut s);
    // 0 and 2 at engine 0 (2 waiting), 1 at engine 1, then both light ones to engine 1.
    s.handle(1.0, Input::Done { id: 1 }).expect("done");
    assert_eq!(
        admitted(&mut s),
        [3],
        "engine 1 serves its own queue: a light one"
    );
    s.handle(2.0, Input::Done { id: 3 }).expect("done");
    assert_eq!(
        admitted(&mut s),
        [4],
        "the second light one waited at engine 1 too"
    );
    s.handle(3.0, Input::Done { id: 0 }).expect("done");
    assert_eq!(admitted(&mut s), [2]);
}

#[test]
fn an_engine_taken_down_is_sent_nothing_until_it_is_back() {
    let mut s = RequestScheduler::new(config("fcfs", vec![limits(1, None); 2])).expect("valid");
    let down = Input::Availability {
        engine: 0,
        up: false,
    };
    s.handle(0.0, down).expect("engine 0");
    s.handle(0.0, arrival(1, 10, 10.0)).expect("new");
    s.handle(0.0, arrival(2, 10, 10.0)).expect("new");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 1, engine: 1 }]);
    let up = Input::Availability {
        engine: 0,
        up: true,
    };
    s.handle(1.0, up).expect("engine 0");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 2, engine: 0 }]);
    let bad = Input::Availability {
        engine: 9,
        up: true,
    };
    assert_eq!(s.handle(1.0, bad), Err(InputError::NoEngine(9)));
}

/// A request of `input` prompt tokens predicted to answer `tokens`, whose client asked for its
/// first token within `slo` seconds.
fn with_slo(id: u64, input: u32, tokens: f64, slo: f64) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: input,
        lengths: SizeDistribution::point(tokens),
        ttft_slo: Some(slo),
        ..Default::default()
    })
}

#[test]
fn a_request_whose_ttft_deadline_nears_goes_before_the_policy_order() {
    // Nothing measured: it goes first once half its deadline has passed.
    let mut s = scheduler("sagesched", 1);
    s.handle(0.0, arrival(0, 100, 10.0)).expect("new");
    s.handle(0.0, with_slo(1, 100, 500.0, 2.0)).expect("new");
    s.handle(0.0, arrival(2, 100, 5.0)).expect("new");
    s.handle(0.0, arrival(3, 100, 5.0)).expect("new");
    assert_eq!(admitted(&mut s), [0]);
    s.handle(0.9, Input::Done { id: 0 }).expect("known");
    assert_eq!(admitted(&mut s), [2], "slack left: the policy's order");
    s.handle(1.0, Input::Done { id: 2 }).expect("known");
    assert_eq!(
        admitted(&mut s),
        [1],
        "half its deadline passed: before the shorter one"
    );

    // Measured: the first byte 1 s after admission for 100 prompt tokens (0.01 s a token), so a
    // 2 s SLO must start by 1 s.
    let mut s = scheduler("sagesched", 1);
    for _ in 0..20 {
        s.handle(0.0, served(100, 11, 2.0, Some(1.0)))
            .expect("learned");
    }
    s.handle(0.0, arrival(0, 100, 10.0)).expect("new");
    s.handle(0.0, with_slo(1, 100, 500.0, 2.0)).expect("new");
    s.handle(0.0, arrival(2, 100, 5.0)).expect("new");
    s.handle(0.0, arrival(3, 100, 5.0)).expect("new");
    assert_eq!(admitted(&mut s), [0]);
    // And one that asks for its first token sooner than it takes alone orders nothing.
    s.handle(0.0, with_slo(4, 100, 500.0, 0.5)).expect("new");
    s.handle(0.95, Input::Done { id: 0 }).expect("known");
    assert_eq!(admitted(&mut s), [2]);
    s.handle(1.05, Input::Done { id: 2 }).expect("known");
    assert_eq!(admitted(&mut s), [1], "less slack than its prefill takes");
    s.handle(3.0, Input::Done { id: 1 }).expect("known");
    assert_eq!(admitted(&mut s), [3], "the impossible deadline is ignored");

    // A deadline never lifts a request above a higher class.
    let mut s = scheduler("fcfs", 1);
    s.handle(0.0, arrival(0, 10, 10.0)).expect("new");
    s.handle(0.0, with_slo(1, 10, 10.0, 0.0)).expect("new");
    s.handle(
        0.0,
        Input::Arrived(Arrival {
            id: 2,
            input_tokens: 10,
            priority: 1,
            ..Default::default()
        }),
    )
    .expect("new");
    decisions(&mut s);
    s.handle(1.0, Input::Done { id: 0 }).expect("known");
    assert_eq!(admitted(&mut s), [2]);
}

/// A request whose prompt's block hashes are `prefix`.
fn turn(id: u64, prefix: &[u64]) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: 10,
        lengths: SizeDistribution::point(10.0),
        prefix: prefix.into(),
        ..Default::default()
    })
}

fn engines_of(s: &mut RequestScheduler) -> Vec<(u64, usize)> {
    decisions(s)
        .into_iter()
        .filter_map(|d| match d {
            Decision::Admit { id, engine } => Some((id, engine)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_prefix_affinity_router_sends_a_conversations_turns_where_it_ran_while_there_is_room() {
    let route = |router| {
        let mut s = RequestScheduler::new(Config {
            router,
            ..config("fcfs", vec![limits(1, None); 2])
        })
        .expect("valid");
        // Two conversations' first turns, one per engine.
        s.handle(0.0, turn(1, &[10, 11])).expect("new");
        s.handle(0.0, turn(2, &[20, 21])).expect("new");
        s.handle(1.0, Input::Done { id: 1 }).expect("known");
        s.handle(1.0, Input::Done { id: 2 }).expect("known");
        // Their second turns repeat them, the second conversation's first.
        s.handle(2.0, turn(3, &[20, 21, 22])).expect("new");
        s.handle(2.0, turn(4, &[10, 11, 12])).expect("new");
        // A third turn of the second conversation while its engine is busy goes to the other.
        s.handle(3.0, Input::Done { id: 4 }).expect("known");
        s.handle(3.0, turn(5, &[20, 21, 22, 23])).expect("new");
        engines_of(&mut s)
    };
    assert_eq!(
        route(Router::PrefixAffinity),
        [(1, 0), (2, 1), (3, 1), (4, 0), (5, 0)]
    );
    assert_eq!(
        route(Router::LeastOutstanding),
        [(1, 0), (2, 1), (3, 0), (4, 1), (5, 1)],
        "without it the turns swap engines"
    );
}
