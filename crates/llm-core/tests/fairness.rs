//! Classes and tenants in the scheduler, exact in virtual time: tenants offering 3:1 share an
//! overloaded engine equally by tokens (VTC), a higher class goes first, sheddable requests are
//! shed and displaced, and one tenant and one class change nothing.

mod common;

use common::admitted;

use std::collections::BTreeMap;
use xsched_llm_core::{
    Arrival, Config, Decision, Fairness, HIGH_CLASS_WINDOW, Input, RequestScheduler, ShedReason,
    SizeDistribution,
};

fn scheduler(
    policy: &str,
    concurrency: usize,
    max_waiting: usize,
    fairness: Fairness,
) -> RequestScheduler {
    RequestScheduler::new(Config {
        max_waiting,
        fairness,
        ..common::config(policy, 1, concurrency)
    })
    .expect("valid")
}

fn arrival(id: u64, class: i32, tenant: usize) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: 100,
        max_tokens: None,
        priority: class,
        tenant,
        lengths: SizeDistribution::point(50.0),
        ..Default::default()
    })
}

/// One engine of 4 slots, each request 100 prompt tokens and 50 output tokens taking 2.5 s
/// (1.6 requests a second): tenant 0 offers 3 a second, tenant 1 one a second, for 200 s. The
/// tokens each tenant was served (prompt + output of the requests done), by `label(tenant)`.
fn overload(policy: &str, label: impl Fn(usize) -> usize) -> [f64; 2] {
    let mut s = scheduler(policy, 4, 100_000, Fairness::default());
    let mut tenant_of = BTreeMap::new();
    // (time, id) of requests running, their end.
    let mut running: Vec<(f64, u64)> = Vec::new();
    let mut served = [0.0; 2];
    let mut id = 0u64;
    let (step, end): (f64, f64) = (0.25, 200.0);
    let mut t: f64 = 0.0;
    while t < end {
        // Arrivals in this step: 0.75 of tenant 0, 0.25 of tenant 1 (one every fourth step).
        let k = (t / step).round() as u64;
        for tenant in [0usize, 1] {
            let due = if tenant == 0 { k % 4 != 3 } else { k % 4 == 3 };
            if due {
                tenant_of.insert(id, tenant);
                s.handle(t, arrival(id, 0, label(tenant))).expect("new");
                id += 1;
            }
        }
        // Completions due by now.
        running.sort_by(|a, b| a.0.total_cmp(&b.0));
        while running.first().is_some_and(|r| r.0 <= t) {
            let (_, done) = running.remove(0);
            s.handle(
                t,
                Input::Progress {
                    id: done,
                    generated: 50,
                },
            )
            .expect("known");
            s.handle(t, Input::Done { id: done }).expect("known");
            served[tenant_of[&done]] += 150.0;
        }
        while let Some(d) = s.poll_decision() {
            if let Decision::Admit { id, .. } = d {
                running.push((t + 2.5, id));
            }
        }
        t += step;
    }
    served
}

#[test]
fn two_tenants_offering_three_to_one_get_equal_token_shares() {
    for policy in ["fcfs", "sagesched"] {
        let fair = overload(policy, |t| t);
        let share = fair[1] / (fair[0] + fair[1]);
        assert!(
            (share - 0.5).abs() <= 0.05,
            "{policy}: tenant 1's share {share:.3} of {fair:?}"
        );
        // As one tenant, arrival order serves them as they offer: 3:1.
        let one = overload(policy, |_| 0);
        let alone = one[1] / (one[0] + one[1]);
        eprintln!("{policy}: tenant 1's token share {share:.3} as a tenant, {alone:.3} without");
        let share = alone;
        assert!(
            (share - 0.25).abs() <= 0.05,
            "{policy} without tenants: {share:.3} of {one:?}"
        );
    }
}

#[test]
fn a_weight_of_three_gets_three_quarters() {
    let mut s = scheduler(
        "fcfs",
        1,
        1000,
        Fairness {
            weights: vec![3.0, 1.0],
            ..Fairness::default()
        },
    );
    // Both backlogged with 40 requests each; serve 40 one at a time.
    for id in 0..80u64 {
        s.handle(0.0, arrival(id, 0, (id % 2) as usize))
            .expect("new");
    }
    let mut counts = [0; 2];
    for k in 0..40 {
        let Some(Decision::Admit { id, .. }) = s.poll_decision() else {
            panic!("one admission each time a slot frees");
        };
        counts[(id % 2) as usize] += 1;
        s.handle(f64::from(k), Input::Progress { id, generated: 50 })
            .expect("known");
        s.handle(f64::from(k), Input::Done { id }).expect("known");
    }
    assert!((29..=31).contains(&counts[0]), "{counts:?}");
}

#[test]
fn a_higher_class_goes_before_every_lower_one_under_every_policy() {
    for policy in ["fcfs", "sagesched", "ssjf"] {
        let mut s = scheduler(policy, 1, 1000, Fairness::default());
        s.handle(0.0, arrival(0, 0, 0)).expect("new");
        for id in 1..10 {
            s.handle(0.0, arrival(id, if id == 7 { 5 } else { 0 }, 0))
                .expect("new");
        }
        assert_eq!(
            s.poll_decision(),
            Some(Decision::Admit { id: 0, engine: 0 })
        );
        s.handle(1.0, Input::Done { id: 0 }).expect("known");
        assert_eq!(
            s.poll_decision(),
            Some(Decision::Admit { id: 7, engine: 0 }),
            "{policy}: the class-5 request next"
        );
    }
}

#[test]
fn sheddable_requests_are_shed_beside_too_many_of_their_kind_and_displaced_by_higher_ones() {
    let mut s = scheduler(
        "fcfs",
        1,
        4,
        Fairness {
            sheddable_waiting: 2,
            ..Fairness::default()
        },
    );
    s.handle(0.0, arrival(0, 0, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Admit { id: 0, engine: 0 })
    );
    for id in 1..=2 {
        s.handle(0.0, arrival(id, -1, 0)).expect("new");
        assert_eq!(s.poll_decision(), None, "{id} waits");
    }
    s.handle(0.0, arrival(3, -1, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Shed {
            id: 3,
            reason: ShedReason::Saturated
        }),
        "a third sheddable one"
    );
    // Fill the queue with standard requests; the next standard one displaces the newest
    // sheddable request rather than being refused.
    s.handle(0.0, arrival(4, 0, 0)).expect("new");
    s.handle(0.0, arrival(5, 0, 0)).expect("new");
    assert_eq!(s.poll_decision(), None);
    s.handle(0.0, arrival(6, 0, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Shed {
            id: 2,
            reason: ShedReason::Displaced
        }),
        "the newest sheddable one"
    );
    s.handle(0.0, arrival(7, 0, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Shed {
            id: 1,
            reason: ShedReason::Displaced
        })
    );
    s.handle(0.0, arrival(8, 0, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Shed {
            id: 8,
            reason: ShedReason::QueueFull
        }),
        "no sheddable one left: the arrival is refused"
    );
    assert_eq!(s.waiting(), 4);
}

#[test]
fn apart_a_sheddable_request_waits_while_a_higher_class_runs_and_a_standard_one_does_not() {
    for apart in [false, true] {
        let mut s = scheduler(
            "fcfs",
            4,
            100,
            Fairness {
                sheddable_apart: apart,
                ..Fairness::default()
            },
        );
        s.handle(0.0, arrival(0, 100, 0)).expect("new");
        assert_eq!(
            s.poll_decision(),
            Some(Decision::Admit { id: 0, engine: 0 })
        );
        s.handle(0.0, arrival(1, -1, 0)).expect("new");
        s.handle(0.0, arrival(2, 0, 0)).expect("new");
        let admitted: Vec<_> = std::iter::from_fn(|| s.poll_decision()).collect();
        let mut expected = vec![Decision::Admit { id: 1, engine: 0 }];
        if apart {
            // The sheddable one waits; the standard one behind it is admitted at once.
            expected.clear();
        }
        expected.push(Decision::Admit { id: 2, engine: 0 });
        assert_eq!(admitted, expected, "apart {apart}");
        // The critical request ends: the sheddable one runs.
        s.handle(1.0, Input::Done { id: 0 }).expect("done");
        let next: Vec<_> = std::iter::from_fn(|| s.poll_decision()).collect();
        let expected = if apart {
            vec![Decision::Admit { id: 1, engine: 0 }]
        } else {
            vec![]
        };
        assert_eq!(next, expected, "apart {apart}");
    }
}

/// A prompt estimated from its characters misses the chat template's tokens; the engine's count,
/// once reported, is what its tenant is charged.
#[test]
fn a_prompt_the_engine_counted_replaces_its_estimate_in_the_tenants_share() {
    let mut s = scheduler("fcfs", 1, 1000, Fairness::default());
    s.handle(0.0, arrival(0, 0, 0)).expect("new");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Admit { id: 0, engine: 0 })
    );
    // Tenant 1 starts waiting at tenant 0's counter (100: the estimate), tenant 0 beside it.
    s.handle(0.0, arrival(1, 0, 1)).expect("new");
    s.handle(0.0, arrival(2, 0, 0)).expect("new");
    // The engine counted 5 000 prompt tokens: tenant 0 has had more, so tenant 1 goes next
    // (on the estimate alone they tie, and the lower tenant, 0, would).
    s.handle(
        1.0,
        Input::Prompt {
            id: 0,
            tokens: 5_000,
        },
    )
    .expect("known");
    s.handle(1.0, Input::Done { id: 0 }).expect("known");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Admit { id: 1, engine: 0 })
    );
}

/// With `sheddable_after_first_token`, a sheddable request waits while a critical request on
/// the engine has no first token yet (their prompts would share a batch), and goes as it comes.
#[test]
fn sheddable_requests_wait_for_a_critical_requests_first_token() {
    for held in [true, false] {
        let mut s = scheduler(
            "fcfs",
            2,
            1000,
            Fairness {
                sheddable_after_first_token: held,
                ..Fairness::default()
            },
        );
        s.handle(0.0, arrival(0, -1, 0)).expect("new");
        s.handle(0.0, arrival(1, 100, 0)).expect("new");
        s.handle(0.0, arrival(2, -1, 0)).expect("new");
        assert_eq!(admitted(&mut s), [0, 1], "the two slots");
        s.handle(1.0, Input::Done { id: 0 }).expect("known");
        if held {
            assert_eq!(admitted(&mut s), [], "held while 1 prefills");
            s.handle(
                1.5,
                Input::Progress {
                    id: 1,
                    generated: 1,
                },
            )
            .expect("known");
        }
        assert_eq!(admitted(&mut s), [2], "held = {held}");
    }
}

/// With `sheddable_after_first_token`, while requests above the standard class are about,
/// sheddable requests whose first token is reported are admitted to an engine one prefill at a
/// time: a second waits until the first one's first token, so a critical request arriving then
/// waits behind one sheddable prompt, not a batch of them. It is not shed meanwhile (a slot is
/// free). One whose first token is never reported (a request not streamed) holds nobody back,
/// and without a request above the standard class in the last `HIGH_CLASS_WINDOW` nothing is
/// held.
#[test]
fn sheddable_prompts_are_prefilled_one_at_a_time_while_critical_requests_are_about() {
    // (the rule, first tokens reported, when the critical request came before the sheddable ones)
    for (rule, reports, critical_before) in [
        (true, true, Some(1.0)),
        (false, true, Some(1.0)),
        (true, false, Some(1.0)),
        (true, true, None),
        (true, true, Some(HIGH_CLASS_WINDOW + 1.0)),
    ] {
        let case = format!("rule {rule}, reports {reports}, critical {critical_before:?} s before");
        let mut s = scheduler(
            "fcfs",
            4,
            1000,
            Fairness {
                sheddable_after_first_token: rule,
                sheddable_waiting: 0,
                ..Fairness::default()
            },
        );
        let t0 = 100.0;
        if let Some(before) = critical_before {
            // A critical request comes, gets its first token and ends.
            s.handle(t0 - before, arrival(9, 100, 0)).expect("new");
            assert_eq!(admitted(&mut s), [9]);
            let first = Input::Progress {
                id: 9,
                generated: 1,
            };
            s.handle(t0 - before, first).expect("known");
            s.handle(t0 - before, Input::Done { id: 9 }).expect("known");
        }
        for id in 0..3 {
            let Input::Arrived(a) = arrival(id, -1, 0) else {
                unreachable!("an arrival")
            };
            let a = Arrival {
                reports_first_token: reports,
                ..a
            };
            s.handle(t0, Input::Arrived(a)).expect("new");
        }
        let held = rule && reports && critical_before.is_some_and(|b| b <= HIGH_CLASS_WINDOW);
        if !held {
            assert_eq!(admitted(&mut s), [0, 1, 2], "{case}");
            continue;
        }
        let decisions: Vec<_> = std::iter::from_fn(|| s.poll_decision()).collect();
        assert_eq!(
            decisions,
            [Decision::Admit { id: 0, engine: 0 }],
            "one prefill at a time, and none shed: {case}"
        );
        let first_token = |s: &mut RequestScheduler, id, t| {
            let p = Input::Progress { id, generated: 1 };
            s.handle(t, p).expect("known");
        };
        first_token(&mut s, 0, t0 + 0.2);
        assert_eq!(admitted(&mut s), [1], "the next after 0's first token");
        first_token(&mut s, 1, t0 + 0.4);
        assert_eq!(admitted(&mut s), [2]);
    }
}
