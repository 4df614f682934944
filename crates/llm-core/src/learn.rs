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
mod tests;
