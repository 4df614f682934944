//! Engines seen from outside, exact in virtual time: a transport failure ejects an engine for
//! its backoff and a timer puts it back; a scrape that says the engine queues, or metrics gone
//! stale, hold admission there; a tenant at its limit and a full queue are refused with their
//! reasons, the same before the arrival ([`RequestScheduler::refusal`]) as at it.

mod common;

use common::{decisions, round_robin as scheduler};

use xsched_llm_core::watch::{EngineMetrics, FIRST_EJECTION_S, STALE_AFTER_S, Scrape};
use xsched_llm_core::{Arrival, Config, Decision, Fairness, Input, RequestScheduler, ShedReason};

fn arrive(s: &mut RequestScheduler, now: f64, id: u64, tenant: usize) {
    let a = Arrival {
        id,
        input_tokens: 10,
        tenant,
        ..Default::default()
    };
    s.handle(now, Input::Arrived(a)).expect("new");
}

fn queueing(engine: usize, waiting: f64) -> Input {
    let metrics = EngineMetrics {
        waiting: Some(waiting),
        ..EngineMetrics::default()
    };
    Input::Scraped {
        engine,
        scrape: Scrape {
            alive: true,
            metrics: Some(metrics),
            slots: None,
        },
    }
}

#[test]
fn a_failed_engine_is_ejected_for_its_backoff_and_a_timer_puts_it_back() {
    let mut s = scheduler(2, 4);
    s.handle(0.0, Input::Failed { engine: 0 })
        .expect("engine 0");
    assert_eq!(s.poll_timeout(), Some(FIRST_EJECTION_S));
    for id in 0..2 {
        arrive(&mut s, 0.1, id, 0);
    }
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Admit { id: 0, engine: 1 },
            Decision::Admit { id: 1, engine: 1 }
        ],
        "nothing goes to the ejected engine"
    );
    s.handle(0.2, Input::Failed { engine: 1 })
        .expect("engine 1");
    assert_eq!(
        s.watched(1).and_then(|w| w.ejected_until()),
        None,
        "the last in service stays"
    );
    s.handle_timeout(FIRST_EJECTION_S);
    assert_eq!(s.poll_timeout(), None);
    arrive(&mut s, 1.1, 2, 0);
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 2, engine: 0 }]);
    // Failing again at once: out twice as long; an answer would have reset it.
    s.handle(1.2, Input::Failed { engine: 0 })
        .expect("engine 0");
    assert_eq!(s.poll_timeout(), Some(1.2 + 2.0 * FIRST_EJECTION_S));
}

#[test]
fn waiting_requests_go_to_an_ejected_engine_the_moment_it_is_back() {
    let mut s = scheduler(2, 1);
    arrive(&mut s, 0.0, 0, 0);
    s.handle(0.0, Input::Failed { engine: 1 })
        .expect("engine 1");
    arrive(&mut s, 0.0, 1, 0);
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 0, engine: 0 }]);
    let back = s.poll_timeout().expect("a readmission timer");
    s.handle_timeout(back);
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 1, engine: 1 }]);
}

#[test]
fn an_engine_that_queues_or_whose_metrics_go_stale_is_sent_nothing() {
    let mut s = scheduler(2, 4);
    s.handle(0.0, queueing(0, 2.0)).expect("engine 0");
    s.handle(0.0, queueing(1, 0.0)).expect("engine 1");
    arrive(&mut s, 0.1, 0, 0);
    arrive(&mut s, 0.1, 1, 0);
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Admit { id: 0, engine: 1 },
            Decision::Admit { id: 1, engine: 1 }
        ]
    );
    s.handle(0.5, queueing(0, 0.0)).expect("engine 0");
    arrive(&mut s, 0.6, 2, 0);
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 2, engine: 0 }]);
    // Engine 1's metrics stop answering (the engine does): stale after STALE_AFTER_S.
    let unanswered = Input::Scraped {
        engine: 1,
        scrape: Scrape {
            alive: true,
            metrics: None,
            slots: None,
        },
    };
    s.handle(0.5 + STALE_AFTER_S, unanswered.clone())
        .expect("1");
    s.handle(0.5 + STALE_AFTER_S, queueing(0, 1.0)).expect("0");
    arrive(&mut s, 4.0, 3, 0);
    assert_eq!(decisions(&mut s), [], "both saturated: it waits");
    s.handle(4.5, queueing(1, 0.0)).expect("1");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 3, engine: 1 }]);
}

#[test]
fn a_tenant_at_its_limit_and_a_full_queue_are_refused_with_their_reasons() {
    let mut s = RequestScheduler::new(Config {
        max_waiting: 1,
        fairness: Fairness {
            tenant_limits: vec![None, Some(2)],
            ..Fairness::default()
        },
        ..common::config("fcfs", 1, 1)
    })
    .expect("valid");
    arrive(&mut s, 0.0, 0, 1);
    arrive(&mut s, 0.0, 1, 1);
    assert_eq!(s.refusal(0, 1), Some(ShedReason::TenantLimit));
    assert_eq!(s.refusal(0, 0), Some(ShedReason::QueueFull));
    arrive(&mut s, 0.0, 2, 1);
    arrive(&mut s, 0.0, 3, 0);
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Admit { id: 0, engine: 0 },
            Decision::Shed {
                id: 2,
                reason: ShedReason::TenantLimit
            },
            Decision::Shed {
                id: 3,
                reason: ShedReason::QueueFull
            },
        ]
    );
    s.handle(1.0, Input::Done { id: 0 }).expect("known");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 1, engine: 0 }]);
    assert_eq!(s.refusal(0, 1), None, "one of its two is done");
}

#[test]
fn no_engine_answering_refuses_before_and_at_arrival() {
    let mut s = scheduler(1, 1);
    let dead = Input::Scraped {
        engine: 0,
        scrape: Scrape::default(),
    };
    s.handle(0.0, dead.clone()).expect("0");
    s.handle(3.0, dead).expect("0");
    assert_eq!(s.refusal(0, 0), Some(ShedReason::NoEngine));
    arrive(&mut s, 3.1, 0, 0);
    assert_eq!(
        decisions(&mut s),
        [Decision::Shed {
            id: 0,
            reason: ShedReason::NoEngine
        }]
    );
}

#[test]
fn a_request_limited_to_some_engines_waits_for_one_of_them_and_holds_back_no_one_else() {
    let mut s = scheduler(2, 1);
    let only = |id, engines: Vec<usize>| {
        Input::Arrived(Arrival {
            id,
            input_tokens: 10,
            engines,
            ..Default::default()
        })
    };
    s.handle(0.0, only(0, vec![1])).expect("new");
    s.handle(0.0, only(1, vec![1])).expect("new");
    assert_eq!(
        decisions(&mut s),
        [Decision::Admit { id: 0, engine: 1 }],
        "engine 0 is free, but not in its subset"
    );
    s.handle(0.5, only(2, Vec::new())).expect("new");
    assert_eq!(
        decisions(&mut s),
        [Decision::Admit { id: 2, engine: 0 }],
        "the head waiting for engine 1 holds back no one who may go to engine 0"
    );
    assert_eq!(s.waiting(), 1, "it kept its place");
    s.handle(1.0, Input::Done { id: 0 }).expect("known");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 1, engine: 1 }]);
}
