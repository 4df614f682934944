//! Pausing a running request for a newcomer: TRAIL below its limit only, FastServe for a
//! higher level, the paused request resumed on its own engine.

use crate::{arrival, config, decisions, limits, scheduler};
use xsched_llm_core::service::ServiceModel;
use xsched_llm_core::{Config, Decision, EvictReason, Input, RequestScheduler};

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
