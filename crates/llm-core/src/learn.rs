//! Learning how many requests each engine should run at once ([`Config::learn_concurrency`],
//! the gateway's `--learn-concurrency`): the scheduler feeds each engine's learner the answers
//! that end ([`Input::Answered`]) and the engine's own token counter ([`Input::Generated`]), and
//! admits within the limit it learns ([`Decision::Limit`]).
//!
//! [`Config::learn_concurrency`]: crate::Config::learn_concurrency
//! [`Input::Answered`]: crate::Input::Answered
//! [`Input::Generated`]: crate::Input::Generated
//! [`Decision::Limit`]: crate::Decision::Limit
//!
//! A batching engine's throughput grows with the requests it runs together, up to a point;
//! past it, more in flight only lengthens each one's steps and moves the queue from the
//! scheduler, where the policy orders it, into the engine, where nothing does. The rule: **the
//! fewest requests in flight whose throughput is within [`WITHIN`] of the best measured**,
//! between 1 and the smaller of `--concurrency` and the engine's slots (never above them).
//!
//! - It starts at the most (so a lightly loaded gateway is never held below what it was
//!   configured for) and measures output tokens per second over windows in which requests
//!   waited in the scheduler's queue (only then is the limit what bounds the engine's work; a
//!   window with too little backlog, [`BACKLOG_SHARE`], is dropped, and nothing changes).
//! - **Where the engine counts the tokens it generates** (vLLM's
//!   `vllm:generation_tokens_total`; llama.cpp's busy slots per decode step times its steps,
//!   `llamacpp:n_busy_slots_per_decode` × `llamacpp:n_decode_total`, both updated every step),
//!   a window is [`WINDOW_S`] of that counter's growth, read at each scrape ([`Count`]). The
//!   answers' own token counts measure only when answers end, so a window of tens of answers
//!   whose lengths spread from 1 to hundreds of tokens measures a level more coarsely than the
//!   rule decides by; llama.cpp's `tokens_predicted_total` is no better, as it too grows only
//!   when an answer ends.
//! - **Elsewhere**, a window is [`WINDOW_ANSWERS`] answers: the level times their output tokens
//!   over their summed time from admission to end (with every slot busy, Little's law).
//! - It steps down one at a time while the new level stays within [`WITHIN`] of the best level
//!   measured, **over two windows** (each one's rate and their mean): one lucky window does
//!   not move it down. A step that falls further goes back, and holds.
//! - While holding it measures again every [`REPROBE`] windows, trying one down and one up by
//!   turns (up is kept when the level below is no longer within [`WITHIN`] of it), so a change
//!   in the load (longer prompts, another client of the engine) moves it.
//!
//! The answers that end just after a change were admitted before it: the first `limit` of
//! them end before the new level's window starts.

/// How far below the best throughput measured a level may be and still be kept.
pub const WITHIN: f64 = 0.05;
/// Windows held before measuring a neighbouring level again.
pub const REPROBE: u32 = 8;
/// Answers in a window at least (and at least eight per request in flight).
pub const WINDOW_ANSWERS: usize = 32;
/// Seconds of the engine's token counter in a window at least.
pub const WINDOW_S: f64 = 8.0;
/// The share of a window's answers (or counter readings) that must have come with requests
/// waiting.
pub const BACKLOG_SHARE: f64 = 0.75;

/// One answer that ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Answer {
    /// When it ended (seconds on any steady clock).
    pub at: f64,
    /// Its output tokens.
    pub output_tokens: u32,
    /// Seconds from its admission to its end.
    pub service_s: f64,
    /// Whether requests were waiting in the scheduler's queue when it ended.
    pub backlog: bool,
}

/// One reading of the engine's own count of the tokens it generated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Count {
    /// When it was read (seconds on the clock of [`Answer::at`]).
    pub at: f64,
    /// Tokens generated since the engine started.
    pub tokens: f64,
    /// Whether requests were waiting in the scheduler's queue when it was read.
    pub backlog: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Measuring the level it is at before deciding anything (the start).
    Measuring,
    /// Trying one level below or above `from`; a level below is kept once a second window
    /// confirms it (`confirmed`: the first did).
    Probing { from: usize, confirmed: bool },
    /// Keeping its level; windows held so far, and whether the next probe goes up.
    Holding { windows: u32, up_next: bool },
}

/// One engine's learner.
#[derive(Clone, Debug)]
pub struct Learner {
    max: usize,
    limit: usize,
    /// Output tokens per second measured at each level (index: the level).
    rates: Vec<Option<f64>>,
    phase: Phase,
    /// Answers still to come from before the last change.
    settle: usize,
    /// The window so far: when it started, its answers, those with a backlog, their tokens and
    /// their service seconds.
    started: Option<f64>,
    answers: usize,
    with_backlog: usize,
    tokens: u64,
    service_s: f64,
    /// Whether the engine's token counter measures (from its first reading on).
    by_counter: bool,
    /// The counter window so far: its first reading, the readings since and those with a
    /// backlog.
    count_start: Option<(f64, f64)>,
    readings: usize,
    readings_with_backlog: usize,
}

impl Learner {
    /// A learner for an engine that may run `max` requests at once (at least 1); it starts
    /// there.
    pub fn new(max: usize) -> Learner {
        let max = max.max(1);
        Learner {
            max,
            limit: max,
            rates: vec![None; max + 1],
            phase: Phase::Measuring,
            settle: 0,
            started: None,
            answers: 0,
            with_backlog: 0,
            tokens: 0,
            service_s: 0.0,
            by_counter: false,
            count_start: None,
            readings: 0,
            readings_with_backlog: 0,
        }
    }

    /// The engine said it runs `slots` at once at most: the learner's most, when lower.
    pub fn bound(&mut self, slots: usize) -> Option<usize> {
        let slots = slots.max(1);
        if slots >= self.max {
            return None;
        }
        self.max = slots;
        self.rates.truncate(slots + 1);
        self.phase = Phase::Measuring;
        self.set(self.limit.min(slots))
    }

    /// Requests it lets the engine run at once now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// What was measured at `level`, in output tokens per second.
    pub fn rate(&self, level: usize) -> Option<f64> {
        self.rates.get(level).copied().flatten()
    }

    /// An answer ended; the new limit when it changes.
    pub fn answered(&mut self, a: Answer) -> Option<usize> {
        if self.settle > 0 {
            self.settle -= 1;
            // The window starts when the last answer from before the change has ended.
            self.started = Some(a.at);
            self.count_start = None;
            return None;
        }
        if self.by_counter {
            return None; // The counter measures; answers only settle a change.
        }
        let Some(started) = self.started else {
            self.started = Some(a.at);
            return None;
        };
        self.answers += 1;
        self.with_backlog += usize::from(a.backlog);
        self.tokens += u64::from(a.output_tokens);
        self.service_s += a.service_s.max(0.0);
        if self.answers < WINDOW_ANSWERS.max(8 * self.limit) {
            return None;
        }
        let (answers, with_backlog, tokens, service_s) =
            (self.answers, self.with_backlog, self.tokens, self.service_s);
        self.started = Some(a.at);
        (self.answers, self.with_backlog, self.tokens, self.service_s) = (0, 0, 0, 0.0);
        let elapsed = a.at - started;
        if (with_backlog as f64) < BACKLOG_SHARE * answers as f64 || elapsed <= 0.0 {
            return None; // The limit did not bound the engine's work: nothing learned.
        }
        if service_s <= 0.0 {
            return None;
        }
        // Little's law with every slot busy: `limit` requests at a time, each at its own tokens
        // per second of service (admission to end). (Tokens over the window's span were tried
        // first: the answers that end in a window were partly generated before it, and windows
        // of tens of answers measured too noisily for a 5 % rule.)
        self.measured(self.limit as f64 * tokens as f64 / service_s)
    }

    /// The engine's token counter was read; the new limit when it changes.
    pub fn counted(&mut self, c: Count) -> Option<usize> {
        self.by_counter = true;
        if self.settle > 0 {
            return None;
        }
        let Some((t0, n0)) = self.count_start else {
            self.restart_count(c);
            return None;
        };
        if c.tokens < n0 || c.at <= t0 {
            self.restart_count(c); // The engine restarted, or the clock did not move.
            return None;
        }
        self.readings += 1;
        self.readings_with_backlog += usize::from(c.backlog);
        if c.at - t0 < WINDOW_S {
            return None;
        }
        let (readings, with_backlog) = (self.readings, self.readings_with_backlog);
        self.restart_count(c);
        if (with_backlog as f64) < BACKLOG_SHARE * readings as f64 {
            return None; // The limit did not bound the engine's work: nothing learned.
        }
        self.measured((c.tokens - n0) / (c.at - t0))
    }

    fn restart_count(&mut self, c: Count) {
        self.count_start = Some((c.at, c.tokens));
        (self.readings, self.readings_with_backlog) = (0, 0);
    }

    /// A window at the current level measured `rate`: what to do next.
    fn measured(&mut self, rate: f64) -> Option<usize> {
        let level = self.limit;
        let known = self.rates[level].map_or(rate, |r| 0.5 * (r + rate));
        self.rates[level] = Some(known);
        let next = match self.phase {
            Phase::Measuring => self.probe(false),
            Phase::Probing { from, confirmed } => {
                // Down is kept while within `WITHIN` of the best level measured, this window
                // and the mean of two; up when the level below is no longer within it of this
                // one.
                let down = level < from;
                let kept = if down {
                    let best = self.rates.iter().flatten().fold(0.0, |a: f64, &b| a.max(b));
                    known.min(rate) >= best * (1.0 - WITHIN)
                } else {
                    self.rates[from].unwrap_or(0.0) < known * (1.0 - WITHIN)
                };
                if kept && down && !confirmed {
                    // Once more at this level before going further.
                    self.phase = Phase::Probing {
                        from,
                        confirmed: true,
                    };
                    level
                } else if kept {
                    // The same direction once more, if there is room.
                    self.probe(level > from)
                } else {
                    self.phase = Phase::Holding {
                        windows: 0,
                        up_next: level < from,
                    };
                    from
                }
            }
            Phase::Holding { windows, up_next } if windows + 1 >= REPROBE => self.probe(up_next),
            Phase::Holding { windows, up_next } => {
                self.phase = Phase::Holding {
                    windows: windows + 1,
                    up_next,
                };
                level
            }
        };
        self.set(next)
    }

    /// Try one level up (or down) from the current one; hold if there is none.
    fn probe(&mut self, up: bool) -> usize {
        let level = self.limit;
        let to = if up {
            (level < self.max).then_some(level + 1)
        } else {
            (level > 1).then(|| level - 1)
        };
        match to {
            Some(to) => {
                self.phase = Phase::Probing {
                    from: level,
                    confirmed: false,
                };
                to
            }
            None => {
                self.phase = Phase::Holding {
                    windows: 0,
                    up_next: !up,
                };
                level
            }
        }
    }

    fn set(&mut self, next: usize) -> Option<usize> {
        if next == self.limit {
            return None;
        }
        // Those in flight now were admitted under the old limit.
        self.settle = self.limit.max(next);
        self.limit = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
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
}
