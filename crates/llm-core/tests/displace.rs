//! Eviction for a higher class, exact in virtual time: a request above the standard class that
//! cannot be admitted evicts the sheddable request admitted last (or every one), at once or,
//! with a TTFT deadline, only once its deadline's guard comes (the core's timer); the slot goes
//! to it when the evicted request's driver reports it done.

mod common;

use common::decisions;

use xsched_llm_core::{
    Arrival, Config, Decision, EvictReason, Eviction, Fairness, Input, RequestScheduler,
    SizeDistribution,
};

fn scheduler(concurrency: usize, eviction: Eviction) -> RequestScheduler {
    RequestScheduler::new(Config {
        fairness: Fairness::with_eviction(eviction),
        ..common::config("fcfs", 1, concurrency)
    })
    .expect("valid")
}

fn arrival(id: u64, class: i32, ttft_slo: Option<f64>) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: 100,
        priority: class,
        lengths: SizeDistribution::point(50.0),
        ttft_slo,
        ..Default::default()
    })
}

fn displaced(id: u64) -> Decision {
    Decision::Evict {
        id,
        engine: 0,
        reason: EvictReason::Displaced,
    }
}

/// Two sheddable requests hold the two slots and a standard one waits (evicting nothing); then
/// a critical one arrives: what it evicts under each rule.
fn critical_after_two_sheddable(eviction: Eviction) -> (RequestScheduler, Vec<Decision>) {
    let mut s = scheduler(2, eviction);
    s.handle(0.0, arrival(0, -1, None)).expect("new");
    s.handle(0.1, arrival(1, -1, None)).expect("new");
    s.handle(0.2, arrival(2, 0, None)).expect("new");
    assert_eq!(decisions(&mut s).len(), 2, "0 and 1 admitted, 2 waits");
    s.handle(0.3, arrival(3, 100, None)).expect("new");
    let evicted = decisions(&mut s);
    (s, evicted)
}

#[test]
fn a_critical_arrival_evicts_as_its_rule_says_the_sheddable_request_admitted_last_first() {
    assert_eq!(critical_after_two_sheddable(Eviction::None).1, []);
    assert_eq!(
        critical_after_two_sheddable(Eviction::One).1,
        [displaced(1)]
    );
    assert_eq!(
        critical_after_two_sheddable(Eviction::All).1,
        [displaced(1), displaced(0)]
    );
}

#[test]
fn the_evicted_slot_goes_to_the_critical_request_once_done_and_no_victim_is_taken_twice() {
    let (mut s, _) = critical_after_two_sheddable(Eviction::One);
    // Its slot is held until its driver says it is gone.
    assert_eq!(s.outstanding(0), 2);
    s.handle(0.4, Input::Done { id: 1 }).expect("known");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 3, engine: 0 }]);
    // A second critical request evicts the other sheddable one, not 1 again.
    s.handle(0.5, arrival(4, 100, None)).expect("new");
    assert_eq!(decisions(&mut s), [displaced(0)]);
    // A standard request evicts nothing, and an evicted one still running is no victim.
    s.handle(0.6, arrival(5, 0, None)).expect("new");
    s.handle(0.7, arrival(6, 100, None)).expect("new");
    assert_eq!(decisions(&mut s), []);
}

#[test]
fn with_a_ttft_deadline_it_evicts_only_when_its_guard_comes_and_not_once_admitted() {
    for freed_first in [false, true] {
        let mut s = scheduler(1, Eviction::One);
        s.handle(0.0, arrival(0, -1, None)).expect("new");
        s.handle(0.0, arrival(1, -1, None)).expect("new");
        decisions(&mut s);
        // Nothing measured yet: its guard comes at half its 2 s deadline.
        s.handle(10.0, arrival(2, 100, Some(2.0))).expect("new");
        assert_eq!(decisions(&mut s), [], "slack left: nothing evicted yet");
        assert_eq!(s.poll_timeout(), Some(11.0));
        s.handle_timeout(10.9);
        assert_eq!(decisions(&mut s), [], "not yet");
        if freed_first {
            s.handle(10.95, Input::Done { id: 0 }).expect("known");
            assert_eq!(decisions(&mut s), [Decision::Admit { id: 2, engine: 0 }]);
            assert_eq!(s.poll_timeout(), None, "admitted: its timer is disarmed");
        } else {
            s.handle_timeout(11.0);
            assert_eq!(decisions(&mut s), [displaced(0)]);
            assert_eq!(s.poll_timeout(), None);
        }
    }
}

#[test]
fn eviction_is_parsed_by_name_and_an_unknown_one_is_named() {
    assert_eq!("all".parse::<Eviction>(), Ok(Eviction::All));
    let err = "some".parse::<Eviction>().expect_err("unknown").to_string();
    assert!(err.contains("some") && err.contains("none"), "{err}");
}
