//! Learned concurrency in the scheduler, exact in virtual time: fed the answers of an engine
//! whose throughput stops growing past two requests at once, it decides a limit of two and
//! admits within it.

mod common;

use xsched_llm_core::{
    Arrival, Config, Decision, EngineReport, Input, RequestScheduler, SizeDistribution,
};

fn scheduler(concurrency: usize) -> RequestScheduler {
    RequestScheduler::new(Config {
        max_waiting: 100_000,
        learn_concurrency: true,
        ..common::config("fcfs", 1, concurrency)
    })
    .expect("valid")
}

#[test]
fn a_learned_limit_is_decided_and_admission_keeps_within_it() {
    // Output tokens a second at each level: two at once is within 5 % of the best, one is not.
    let curve = [0.0, 100.0, 190.0, 196.0, 198.0];
    let mut s = scheduler(4);
    for id in 0..2000 {
        let a = Arrival {
            id,
            input_tokens: 10,
            lengths: SizeDistribution::point(100.0),
            ..Default::default()
        };
        s.handle(0.0, Input::Arrived(a)).expect("new");
    }
    let (mut running, mut limit, mut limits) = (Vec::new(), 4, Vec::new());
    let mut t = 0.0;
    loop {
        for d in std::iter::from_fn(|| s.poll_decision()) {
            match d {
                Decision::Admit { id, .. } => {
                    running.push(id);
                    assert!(running.len() <= limit, "admitted past the limit {limit}");
                }
                Decision::Limit { concurrency, .. } => {
                    limit = concurrency;
                    limits.push(concurrency);
                }
                other => panic!("{other:?}"),
            }
        }
        if running.is_empty() {
            break;
        }
        // The oldest ends; each of `level` requests took `level` times the gap between ends.
        let level = running.len();
        t += 100.0 / curve[level];
        let id = running.remove(0);
        let answered = Input::Answered {
            engine: 0,
            output_tokens: 100,
            service_s: level as f64 * 100.0 / curve[level],
        };
        s.handle(t, answered).expect("engine 0");
        s.handle(t, Input::Done { id }).expect("known");
    }
    assert_eq!(
        limits.first(),
        Some(&3),
        "it steps down from the most: {limits:?}"
    );
    assert_eq!(s.learned(0), Some(2), "{limits:?}");
    // An engine that reports fewer slots bounds the learner at once.
    let mut s = scheduler(4);
    let report = EngineReport {
        slots: Some(1),
        ..EngineReport::default()
    };
    s.handle(0.0, Input::Engine { engine: 0, report })
        .expect("engine 0");
    assert_eq!(
        s.poll_decision(),
        Some(Decision::Limit {
            engine: 0,
            concurrency: 1
        })
    );
    assert_eq!(s.learned(0), Some(1));
}
