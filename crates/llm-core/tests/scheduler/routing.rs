//! Which engine a request goes to: the least outstanding, the cost-aware router with requests
//! placed on arrival, engines taken down and back, and prefix affinity for a conversation's
//! turns.

use crate::{admitted, arrival, config, decisions, limits};
use xsched_llm_core::{
    Arrival, Config, Decision, Input, Placement, RequestScheduler, Router, SchedulerError,
    SizeDistribution,
};

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
    assert_eq!(s.handle(1.0, bad), Err(SchedulerError::UnknownEngine(9)));
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
