//! The tests of `learn.rs`.

use super::*;

/// Feed `l` `answers` answers of 100 tokens from an engine whose output throughput at each
/// level is `curve[level]` tokens a second, always backlogged, from time `t`; the time after.
fn drive(l: &mut Learner, curve: &[f64], answers: usize, mut t: f64) -> f64 {
    for _ in 0..answers {
        let level = l.limit();
        t += 100.0 / curve[level];
        l.answered(Answer {
            at: t,
            output_tokens: 100,
            // Each of `level` requests runs `level` times the gap between two ends.
            service_s: level as f64 * 100.0 / curve[level],
            backlog: true,
        });
    }
    t
}

/// The level such an engine's learner spent most of the second half of `answers` answers
/// at (it leaves it now and then to measure a neighbour), from the start.
fn run(curve: &[f64], answers: usize) -> (usize, Learner) {
    let mut l = Learner::new(curve.len() - 1);
    let mut t = drive(&mut l, curve, answers / 2, 0.0);
    let mut at = vec![0usize; curve.len()];
    for _ in answers / 2..answers {
        at[l.limit()] += 1;
        t = drive(&mut l, curve, 1, t);
    }
    let most = (1..curve.len()).max_by_key(|&k| at[k]).unwrap_or(1);
    (most, l)
}

/// An engine whose token counter grows at `rate(level)` tokens a second, read every half
/// second, always backlogged, with an answer of 100 tokens ending whenever 100 more were
/// generated (what settles a change), for `seconds` from `at`.
struct Counted {
    at: f64,
    tokens: f64,
    next_answer: f64,
}

impl Counted {
    fn new() -> Counted {
        Counted {
            at: 0.0,
            tokens: 0.0,
            next_answer: 100.0,
        }
    }

    fn run(&mut self, l: &mut Learner, seconds: f64, rate: impl Fn(usize) -> f64) {
        let end = self.at + seconds;
        while self.at < end {
            let level = l.limit();
            self.at += 0.5;
            self.tokens += 0.5 * rate(level);
            while self.tokens >= self.next_answer {
                self.next_answer += 100.0;
                l.answered(Answer {
                    at: self.at,
                    output_tokens: 100,
                    service_s: 1.0,
                    backlog: true,
                });
            }
            l.counted(Count {
                at: self.at,
                tokens: self.tokens,
                backlog: true,
            });
        }
    }
}

/// The level a learner fed by its engine's counter spent most of the second half of
/// `seconds` at.
fn run_counted(curve: &[f64], seconds: f64) -> usize {
    let mut l = Learner::new(curve.len() - 1);
    let mut engine = Counted::new();
    engine.run(&mut l, seconds / 2.0, |k| curve[k]);
    let mut at = vec![0usize; curve.len()];
    while engine.at < seconds {
        at[l.limit()] += 1;
        engine.run(&mut l, 0.5, |k| curve[k]);
    }
    (1..curve.len()).max_by_key(|&k| at[k]).unwrap_or(1)
}

#[test]
fn the_engines_token_counter_measures_the_same_levels() {
    assert_eq!(run_counted(&[0.0, 10.0, 19.0, 20.0, 20.5], 20_000.0), 3);
    assert_eq!(run_counted(&[0.0, 10.0, 20.0, 30.0, 40.0], 20_000.0), 4);
    assert_eq!(run_counted(&[0.0, 10.0, 10.0, 10.0, 10.0], 20_000.0), 1);
    assert_eq!(run_counted(&[0.0, 10.0, 25.0, 20.0, 15.0], 20_000.0), 2);
}

#[test]
fn once_the_counter_reads_answers_only_settle_a_change() {
    let mut l = Learner::new(4);
    let mut engine = Counted::new();
    engine.run(&mut l, 1.0, |_| 100.0);
    // Answers whose own figures say one at a time is as fast: ignored.
    for i in 0..1_000 {
        let changed = l.answered(Answer {
            at: 2.0 + f64::from(i),
            output_tokens: 100,
            service_s: 0.01,
            backlog: true,
        });
        assert_eq!(changed, None);
    }
    assert_eq!(l.rate(4), None);
    engine.run(&mut l, 10.0, |_| 100.0);
    assert!(l.rate(4).is_some_and(|r| (r - 100.0).abs() < 1e-9), "{l:?}");
}

#[test]
fn a_step_down_needs_a_second_window_to_confirm_it() {
    // A measured llama-server's curve: every level below 4 loses 11 %
    // or more. One lucky window at 3 (within 5 % of 4) does not keep it there.
    let curve = [0.0, 75.0, 94.0, 99.0, 111.0];
    let lucky = [0.0, 75.0, 94.0, 108.0, 111.0];
    let mut l = Learner::new(4);
    let mut engine = Counted::new();
    // Its first window at 3 is lucky (108, within 5 % of 111).
    while l.rate(3).is_none() {
        engine.run(&mut l, 0.5, |k| lucky[k]);
    }
    assert!(l.rate(4).is_some(), "it measured 4 first: {l:?}");
    assert_eq!(l.limit(), 3, "it measures 3 once more: {l:?}");
    // The next is not: back to 4.
    let first = l.rate(3);
    while l.rate(3) == first {
        engine.run(&mut l, 0.5, |k| curve[k]);
    }
    assert_eq!(l.limit(), 4, "{l:?}");
    // Two windows that agree move it down.
    let mut l = Learner::new(4);
    let mut engine = Counted::new();
    engine.run(&mut l, 80.0, |k| [0.0, 75.0, 94.0, 108.0, 111.0][k]);
    assert!(l.limit() <= 3, "{l:?}");
}

#[test]
fn a_counter_that_goes_back_restarts_the_window() {
    let mut l = Learner::new(2);
    for (at, tokens) in [(0.0, 1_000.0), (5.0, 1_500.0), (6.0, 10.0), (9.0, 300.0)] {
        l.counted(Count {
            at,
            tokens,
            backlog: true,
        });
    }
    assert_eq!(l.rate(2), None, "the engine restarted: no window yet");
    l.counted(Count {
        at: 14.0,
        tokens: 810.0,
        backlog: true,
    });
    assert!(l.rate(2).is_some_and(|r| (r - 100.0).abs() < 1e-9), "{l:?}");
}

#[test]
fn it_settles_on_the_fewest_in_flight_within_five_percent_of_the_best() {
    // Throughput grows to 3 and barely after: 3 (20 is within 5 % of 20.5; 19 is not).
    assert_eq!(run(&[0.0, 10.0, 19.0, 20.0, 20.5], 2_000).0, 3);
    // It grows all the way: the most.
    assert_eq!(run(&[0.0, 10.0, 20.0, 30.0, 40.0], 2_000).0, 4);
    // Flat: one at a time does as well.
    assert_eq!(run(&[0.0, 10.0, 10.0, 10.0, 10.0], 2_000).0, 1);
    // Past a point more in flight is slower (contention): the best.
    assert_eq!(run(&[0.0, 10.0, 25.0, 20.0, 15.0], 2_000).0, 2);
    let (_, l) = run(&[0.0, 10.0, 19.0, 20.0, 20.5], 2_000);
    assert!(l.rate(4).is_some_and(|r| (r - 20.5).abs() < 1e-9), "{l:?}");
}

#[test]
fn it_never_leaves_one_to_the_configured_most() {
    for curve in [[0.0, 5.0, 1.0], [0.0, 1.0, 50.0]] {
        let mut l = Learner::new(2);
        let mut t = 0.0;
        for _ in 0..2_000 {
            t = drive(&mut l, &curve, 1, t);
            assert!((1..=2).contains(&l.limit()));
        }
    }
    assert_eq!(Learner::new(0).limit(), 1, "at least one");
}

#[test]
fn without_a_backlog_nothing_is_learned_and_it_stays_at_the_most() {
    let mut l = Learner::new(4);
    for i in 0..1_000 {
        let changed = l.answered(Answer {
            at: f64::from(i),
            output_tokens: 100,
            service_s: 4.0,
            backlog: i % 2 == 0,
        });
        assert_eq!(changed, None);
    }
    assert_eq!((l.limit(), l.rate(4)), (4, None));
}

#[test]
fn it_follows_a_load_that_changes() {
    // Flat at first (it goes down to 1), then growing with the level: a reprobe up finds it.
    let (level, mut l) = run(&[0.0, 10.0, 10.0, 10.0, 10.0], 2_000);
    assert_eq!(level, 1);
    let mut t = drive(&mut l, &[0.0, 10.0, 20.0, 30.0, 40.0], 3_000, 1e6);
    let mut at_most = 0;
    for _ in 0..1_000 {
        at_most += usize::from(l.limit() == 4);
        t = drive(&mut l, &[0.0, 10.0, 20.0, 30.0, 40.0], 1, t);
    }
    assert!(at_most > 800, "{at_most} of 1000 at the most");
}
