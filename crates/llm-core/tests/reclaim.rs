//! An engine that stops answering, exact in virtual time: the requests there whose answer has
//! not begun are taken back and placed on an engine that answers (or shed when none does), and
//! the silent engine is sent nothing until it answers again.

mod common;

use common::{decisions, round_robin as scheduler};

use xsched_llm_core::{Arrival, Decision, EvictReason, Input, RequestScheduler, ShedReason};

fn arrive(s: &mut RequestScheduler, id: u64) {
    let a = Arrival {
        id,
        input_tokens: 10,
        ..Default::default()
    };
    s.handle(0.0, Input::Arrived(a)).expect("new");
}

fn silent(engine: usize, responsive: bool) -> Input {
    Input::Responsive { engine, responsive }
}

#[test]
fn requests_not_yet_answering_move_to_an_engine_that_answers() {
    let mut s = scheduler(2, 3);
    for id in 0..4 {
        arrive(&mut s, id);
    }
    // Round robin: 0 and 2 on engine 0, 1 and 3 on engine 1.
    assert_eq!(decisions(&mut s).len(), 4);
    s.handle(1.0, Input::Answering { id: 0 }).expect("known");
    s.handle(2.0, silent(0, false)).expect("engine 0");
    assert_eq!(
        decisions(&mut s),
        [
            Decision::Evict {
                id: 2,
                engine: 0,
                reason: EvictReason::Unresponsive
            },
            Decision::Admit { id: 2, engine: 1 },
        ],
        "0 has begun answering: it stays"
    );
    // Nothing more goes to engine 0 while it is silent, even with room there.
    arrive(&mut s, 4);
    assert_eq!(decisions(&mut s), [], "engine 1 is full, engine 0 silent");
    s.handle(3.0, silent(0, true)).expect("engine 0");
    assert_eq!(decisions(&mut s), [Decision::Admit { id: 4, engine: 0 }]);
}

#[test]
fn with_no_engine_answering_they_are_shed() {
    let mut s = scheduler(1, 2);
    arrive(&mut s, 0);
    arrive(&mut s, 1);
    decisions(&mut s);
    s.handle(
        1.0,
        Input::Progress {
            id: 1,
            generated: 3,
        },
    )
    .expect("known");
    s.handle(2.0, silent(0, false)).expect("engine 0");
    let evict = Decision::Evict {
        id: 0,
        engine: 0,
        reason: EvictReason::Unresponsive,
    };
    assert_eq!(
        decisions(&mut s),
        [
            evict,
            Decision::Shed {
                id: 0,
                reason: ShedReason::NoEngine
            }
        ]
    );
    assert_eq!(s.outstanding(0), 1, "1 generated tokens there: it stays");
    assert_eq!(
        s.handle(2.0, silent(7, false)),
        Err(xsched_llm_core::SchedulerError::UnknownEngine(7))
    );
}
