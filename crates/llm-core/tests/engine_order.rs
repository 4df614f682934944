//! Ordering at the engine: every request is sent at once, up to what an engine holds, with a
//! number for the engine's own priority queue (lower first): the policy's order among requests
//! that arrive together, aging built in, a higher class always lower. An engine that refuses
//! numbers is ordered by the scheduler again.

mod common;

use common::admitted;

use xsched_llm_core::{
    Arrival, CLASS_SPAN_MS, Config, EngineOrder, Input, RequestScheduler, SchedulerError,
    SizeDistribution,
};

fn scheduler(policy: &str, holds: usize) -> RequestScheduler {
    RequestScheduler::new(Config {
        engine_order: Some(EngineOrder {
            holds,
            horizon_s: 10.0,
        }),
        ..common::config(policy, 1, 2)
    })
    .expect("valid")
}

fn arrive(s: &mut RequestScheduler, now: f64, id: u64, class: i32, output: f64) {
    let a = Arrival {
        id,
        input_tokens: 100,
        priority: class,
        lengths: SizeDistribution::point(output),
        ..Default::default()
    };
    s.handle(now, Input::Arrived(a)).expect("arrives");
}

#[test]
fn every_request_goes_at_once_beyond_the_concurrency_up_to_what_the_engine_holds() {
    let mut s = scheduler("fcfs", 5);
    for id in 0..7 {
        arrive(&mut s, 0.0, id, 0, 50.0);
    }
    // Concurrency 2, but the engine orders: five go, two wait for room.
    assert_eq!(admitted(&mut s), vec![0, 1, 2, 3, 4]);
    assert_eq!(s.waiting(), 2);
    s.handle(1.0, Input::Done { id: 0 }).expect("done");
    assert_eq!(admitted(&mut s), vec![5]);
}

#[test]
fn fcfs_numbers_follow_arrival() {
    let mut s = scheduler("fcfs", 100);
    for id in 0..4 {
        arrive(&mut s, id as f64 * 0.5, id, 0, 50.0 + 100.0 * id as f64);
    }
    let n: Vec<i64> = (0..4)
        .map(|id| s.engine_priority(id).expect("ordered"))
        .collect();
    assert!(n.windows(2).all(|w| w[0] < w[1]), "{n:?}");
}

#[test]
fn sagesched_numbers_put_the_shorter_answer_first_among_requests_arriving_together() {
    let mut s = scheduler("sagesched-oracle", 100);
    arrive(&mut s, 0.0, 0, 0, 500.0);
    arrive(&mut s, 0.0, 1, 0, 20.0);
    arrive(&mut s, 0.0, 2, 0, 200.0);
    let n = |s: &RequestScheduler, id| s.engine_priority(id).expect("ordered");
    assert!(n(&s, 1) < n(&s, 2) && n(&s, 2) < n(&s, 0));
}

#[test]
fn a_long_answer_is_passed_only_by_requests_arriving_within_the_horizon() {
    let mut s = scheduler("sagesched-oracle", 1000);
    arrive(&mut s, 0.0, 0, 0, 20.0);
    arrive(&mut s, 0.0, 1, 0, 2000.0);
    let long = s.engine_priority(1).expect("ordered");
    // Short answers keep arriving; from some time on within the horizon (10 s at most past
    // the long one's arrival, with the tenant alike) their numbers are higher.
    let mut passed_until = 0.0;
    for k in 0..300u64 {
        let t = 0.1 * k as f64;
        arrive(&mut s, t, 2 + k, 0, 20.0);
        if s.engine_priority(2 + k).expect("ordered") < long {
            passed_until = t;
        }
    }
    assert!(passed_until > 1.0 && passed_until <= 10.0, "{passed_until}");
}

#[test]
fn a_higher_class_always_gets_a_lower_number() {
    let mut s = scheduler("sagesched-oracle", 100);
    arrive(&mut s, 0.0, 0, 0, 5.0);
    arrive(&mut s, 100.0, 1, 1, 5000.0);
    arrive(&mut s, 0.0, 2, -1, 1.0);
    let n = |id| s.engine_priority(id).expect("ordered");
    assert!(n(1) < n(0) && n(0) < n(2));
    assert!(n(0) - n(1) > CLASS_SPAN_MS / 2);
}

#[test]
fn an_engine_that_refuses_numbers_is_admitted_to_within_its_concurrency_again() {
    let mut s = scheduler("fcfs", 100);
    s.handle(
        0.0,
        Input::EngineOrders {
            engine: 0,
            orders: false,
        },
    )
    .expect("known engine");
    for id in 0..4 {
        arrive(&mut s, 0.0, id, 0, 50.0);
    }
    assert_eq!(admitted(&mut s), vec![0, 1]);
    assert_eq!(s.engine_priority(0), None);
}

#[test]
fn without_engine_order_no_number_is_given() {
    let mut s = RequestScheduler::new(common::config("fcfs", 1, 2)).expect("valid");
    arrive(&mut s, 0.0, 0, 0, 50.0);
    assert_eq!(admitted(&mut s), vec![0]);
    assert_eq!(s.engine_priority(0), None);
    // Telling it an engine orders changes nothing: it was not configured to.
    s.handle(
        0.0,
        Input::EngineOrders {
            engine: 0,
            orders: true,
        },
    )
    .expect("known engine");
    assert_eq!(s.engine_priority(0), None);
}

#[test]
fn a_bad_engine_order_is_refused() {
    let bad = |holds, horizon_s| {
        RequestScheduler::new(Config {
            engine_order: Some(EngineOrder { holds, horizon_s }),
            ..common::config("fcfs", 1, 2)
        })
        .err()
    };
    assert!(matches!(bad(0, 10.0), Some(SchedulerError::Zero(_))));
    assert!(matches!(bad(4, 0.0), Some(SchedulerError::Horizon(_))));
    assert!(matches!(bad(4, f64::NAN), Some(SchedulerError::Horizon(_))));
}
