//! The order each policy admits in: arrival, predicted size, cost with the prompt, measured
//! time, class, aging, the whole request's index, and a TTFT deadline that nears.

use crate::{admitted, arrival, decisions, order_after, scheduler, served};
use xsched_llm_core::{Arrival, Input, SizeDistribution};

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
