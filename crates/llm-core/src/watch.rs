//! What a driver sees of an engine from outside, turned into the scheduler's view of it: its
//! scraped metrics (saturated, stale, silent) and its transport failures (ejected, backed off).
//! These are serving decisions like admission, so they live here, fed timed inputs, and the
//! engine simulator runs the same rules the gateway and the endpoint picker do.
//!
//! The rules (Envoy's passive outlier detection, llm-d's staleness):
//! - **An engine that queues is saturated**: while its metrics say requests wait in its own
//!   queue, it is sent nothing more (its report's `step_tokens` is 0).
//! - **Stale is saturated**: metrics that answered before and have not for [`STALE_AFTER_S`]
//!   count as saturated until they answer again. An engine with no metrics at all is admitted
//!   by its concurrency alone.
//! - **Silent is unresponsive**: no answer at all to its scrapes (not even an error status) for
//!   [`SILENT_AFTER_S`] since the last one (or since the first scrape) and it is hung or gone.
//! - **A transport failure ejects**: an engine that refuses a connection, drops one, or sends
//!   nothing in time is sent nothing for a backoff ([`FIRST_EJECTION_S`], doubling with each
//!   ejection in a row, at most [`LONGEST_EJECTION_S`]); then its next request probes it. Any
//!   answer (even an error status: the engine is alive) resets the doubling. The last engine in
//!   service is never ejected: a request is better sent to it than refused.
//! - **Silence in the engine's queue is not a hang**: an answer the engine has not sent a byte
//!   of for the idle timeout is cut, unless within that timeout the engine's metrics said
//!   requests wait in its own queue and its token counter moved, and they are fresh
//!   ([`Watched::queues_while_working`]). Under `--order-at engine` every request waits there,
//!   silent (vLLM sends a stream's head at once and nothing more until it runs it). "Within
//!   the timeout", not "at the last scrape": a request just taken from the queue is silent
//!   until its first token while the metrics may already say nothing waits. An engine that
//!   hangs stops its counter and is cut as before, one that has queued nothing for a whole
//!   timeout has no queue to excuse a silence, and one without a counter never excuses one.

/// What an engine reports of its next step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineReport {
    /// Prompt tokens it can start for new requests in its next step (`None`: unlimited; 0: it
    /// starts none, e.g. while requests sent earlier have not started).
    pub step_tokens: Option<u32>,
    /// Free KV tokens (`None`: unknown).
    pub kv_free_tokens: Option<u64>,
    /// Requests waiting in its own queue.
    pub waiting: usize,
    /// Requests it runs at once at most, when it says (llama.cpp's slots): admission keeps
    /// within the smaller of this and the configured concurrency.
    pub slots: Option<usize>,
}

/// Metrics that answered before and not for this long are stale (seconds).
pub const STALE_AFTER_S: f64 = 3.0;
/// Scrapes unanswered for this long mean the engine is silent (seconds).
pub const SILENT_AFTER_S: f64 = 3.0;
/// An engine's first ejection in a row (seconds).
pub const FIRST_EJECTION_S: f64 = 1.0;
/// The longest ejection: the doubling stops here (seconds).
pub const LONGEST_EJECTION_S: f64 = 30.0;

/// What an engine's metrics said, each summed over its label sets (`None`: not exposed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineMetrics {
    /// Requests waiting in the engine's own queue.
    pub waiting: Option<f64>,
    /// Requests it runs.
    pub running: Option<f64>,
    /// The fraction of its KV cache in use (0 to 1).
    pub kv_used: Option<f64>,
    /// Tokens it has generated since it started, counted at every step.
    pub generated: Option<f64>,
}

impl EngineMetrics {
    /// Whether any figure was read.
    pub fn any(&self) -> bool {
        self.waiting.is_some()
            || self.running.is_some()
            || self.kv_used.is_some()
            || self.generated.is_some()
    }
}

/// What one scrape of an engine brought back.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Scrape {
    /// Whether the engine answered at all (any status) in time.
    pub alive: bool,
    /// Its metrics, when they answered with figures that are read.
    pub metrics: Option<EngineMetrics>,
    /// The requests it runs at once, when it says (llama.cpp's `total_slots`).
    pub slots: Option<usize>,
}

/// What a scrape changes for the scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Seen {
    /// The engine's new report.
    pub report: Option<EngineReport>,
    /// Whether it answers, where that changed.
    pub responsive: Option<bool>,
    /// Its token counter.
    pub generated: Option<f64>,
}

/// One engine as seen from outside.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Watched {
    metrics: EngineMetrics,
    slots: Option<usize>,
    /// When its metrics last answered (`None`: never).
    last_ok: Option<f64>,
    /// When its token counter last moved (`None`: not since it was first read).
    last_progress: Option<f64>,
    /// When its metrics last said requests wait in its queue (`None`: never).
    last_queued: Option<f64>,
    stale: bool,
    /// When its first scrape came, and when it last answered one at all.
    first_scrape: Option<f64>,
    last_alive: Option<f64>,
    silent: bool,
    /// Until when it is ejected.
    ejected_until: Option<f64>,
    /// Ejections since its last answer (the backoff's exponent).
    in_a_row: u32,
    ejections: u64,
    failures: u64,
}

/// How long the `n`-th ejection in a row (from 0) lasts, in seconds.
pub fn backoff_s(n: u32) -> f64 {
    (FIRST_EJECTION_S * f64::from(1u32 << n.min(16))).min(LONGEST_EJECTION_S)
}

/// The report for `metrics`: saturated (`step_tokens` 0) when `stale` or the engine queues.
pub fn report_of(
    metrics: EngineMetrics,
    stale: bool,
    slots: Option<usize>,
    kv_tokens: Option<u64>,
) -> EngineReport {
    let waiting = metrics.waiting.unwrap_or(0.0);
    EngineReport {
        step_tokens: (stale || waiting >= 1.0).then_some(0),
        kv_free_tokens: metrics
            .kv_used
            .zip(kv_tokens)
            .map(|(used, cap)| ((1.0 - used.clamp(0.0, 1.0)) * cap as f64) as u64),
        waiting: waiting as usize,
        slots,
    }
}

impl Watched {
    /// A scrape at `now`: what changes for the scheduler (an engine of `kv_tokens`).
    pub fn scraped(&mut self, now: f64, scrape: Scrape, kv_tokens: Option<u64>) -> Seen {
        let first = *self.first_scrape.get_or_insert(now);
        if scrape.alive {
            self.last_alive = Some(now);
        }
        let silent = now - self.last_alive.unwrap_or(first) >= SILENT_AFTER_S;
        let responsive = (silent != self.silent).then_some(!silent);
        self.silent = silent;
        let slots_changed = scrape.slots.is_some() && scrape.slots != self.slots;
        if scrape.slots.is_some() {
            self.slots = scrape.slots;
        }
        let report = match scrape.metrics {
            Some(m) => {
                if let (Some(was), Some(is)) = (self.metrics.generated, m.generated)
                    && is > was
                {
                    self.last_progress = Some(now);
                }
                if m.waiting.is_some_and(|w| w >= 1.0) {
                    self.last_queued = Some(now);
                }
                self.metrics = m;
                self.last_ok = Some(now);
                self.stale = false;
                Some(report_of(m, false, self.slots, kv_tokens))
            }
            None => {
                let stale = self.last_ok.is_some_and(|t| now - t >= STALE_AFTER_S);
                let changed = (stale && !self.stale) || slots_changed;
                self.stale = stale;
                changed.then(|| report_of(self.metrics, stale, self.slots, kv_tokens))
            }
        };
        Seen {
            report,
            responsive,
            generated: scrape.metrics.and_then(|m| m.generated),
        }
    }

    /// A transport failure at `now`, with `others` engines in service beside it: until when it
    /// is ejected, if it is (not when it is out already or would be the last in service).
    pub fn failed(&mut self, now: f64, others: usize) -> Option<f64> {
        self.failures += 1;
        if self.ejected_until.is_some() || others == 0 {
            return None;
        }
        let until = now + backoff_s(self.in_a_row);
        self.ejected_until = Some(until);
        self.ejections += 1;
        self.in_a_row += 1;
        Some(until)
    }

    /// It answered (any status): the backoff's doubling starts over, unless it is out.
    pub fn replied(&mut self) {
        if self.ejected_until.is_none() {
            self.in_a_row = 0;
        }
    }

    /// Put it back if its ejection is over at `now`; whether it was.
    pub fn readmit(&mut self, now: f64) -> bool {
        let over = self.ejected_until.is_some_and(|t| t <= now);
        if over {
            self.ejected_until = None;
        }
        over
    }

    /// Until when it is ejected (`None`: it is in service).
    pub fn ejected_until(&self) -> Option<f64> {
        self.ejected_until
    }

    /// Whether it is silent (no answer to its scrapes for [`SILENT_AFTER_S`]).
    pub fn silent(&self) -> bool {
        self.silent
    }

    /// Whether an answer it has sent nothing of for `silence_s` at `now` waits its turn in
    /// its queue rather than on a hung engine: its metrics answered within [`STALE_AFTER_S`],
    /// and within `silence_s` they said requests wait and its token counter moved.
    pub fn queues_while_working(&self, now: f64, silence_s: f64) -> bool {
        let within = |t: Option<f64>| t.is_some_and(|t| now - t < silence_s);
        let fresh = self.last_ok.is_some_and(|t| now - t < STALE_AFTER_S);
        fresh && !self.silent && within(self.last_queued) && within(self.last_progress)
    }

    /// Whether its metrics are stale.
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// Its metrics as last read (`None`: they never answered).
    pub fn metrics(&self) -> Option<EngineMetrics> {
        self.last_ok.map(|_| self.metrics)
    }

    /// The slots it said it has.
    pub fn slots(&self) -> Option<usize> {
        self.slots
    }

    /// Times it was ejected, and transport failures, so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.ejections, self.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(n: f64) -> Scrape {
        Scrape {
            alive: true,
            metrics: Some(EngineMetrics {
                waiting: Some(n),
                ..EngineMetrics::default()
            }),
            slots: None,
        }
    }

    const DEAD: Scrape = Scrape {
        alive: false,
        metrics: None,
        slots: None,
    };

    #[test]
    fn the_backoff_doubles_from_one_second_to_thirty() {
        let secs: Vec<f64> = (0..7).map(backoff_s).collect();
        assert_eq!(secs, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        assert_eq!(backoff_s(u32::MAX), LONGEST_EJECTION_S);
    }

    #[test]
    fn ejections_double_in_a_row_reset_on_an_answer_and_spare_the_last() {
        let mut w = Watched::default();
        assert_eq!(w.failed(0.0, 0), None, "the last in service stays");
        assert_eq!(w.failed(10.0, 1), Some(11.0));
        assert_eq!(w.failed(10.5, 1), None, "out already");
        assert!(!w.readmit(10.9));
        assert!(w.readmit(11.0));
        w.replied();
        assert_eq!(
            w.failed(12.0, 1),
            Some(13.0),
            "an answer reset the doubling"
        );
        assert!(w.readmit(13.0));
        assert_eq!(w.failed(13.5, 1), Some(15.5), "in a row: twice as long");
        assert_eq!(w.counts(), (3, 5));
    }

    #[test]
    fn a_queueing_engine_is_saturated_and_known_metrics_gone_go_stale() {
        let mut w = Watched::default();
        let seen = w.scraped(0.0, waiting(2.0), None);
        assert_eq!(seen.report.and_then(|r| r.step_tokens), Some(0));
        let seen = w.scraped(0.5, waiting(0.0), None);
        assert_eq!(seen.report.and_then(|r| r.step_tokens), None, "free again");
        let unread = Scrape {
            alive: true,
            ..DEAD
        };
        assert_eq!(w.scraped(3.0, unread, None).report, None, "not stale yet");
        let seen = w.scraped(3.5, unread, None);
        assert_eq!(seen.report.and_then(|r| r.step_tokens), Some(0), "stale");
        assert!(w.stale());
        assert_eq!(w.scraped(4.0, unread, None).report, None, "said once");
        assert_eq!(seen.responsive, None, "it answers: not silent");
    }

    #[test]
    fn an_engine_without_metrics_is_never_stale_and_silence_is_counted_from_the_first_scrape() {
        let mut w = Watched::default();
        assert_eq!(w.scraped(5.0, DEAD, None), Seen::default());
        assert_eq!(w.scraped(7.9, DEAD, None).responsive, None);
        assert_eq!(w.scraped(8.0, DEAD, None).responsive, Some(false));
        assert_eq!(w.scraped(8.5, DEAD, None).responsive, None, "said once");
        let back = w.scraped(9.0, waiting(0.0), Some(1000));
        assert_eq!(back.responsive, Some(true));
        assert_eq!(back.report.and_then(|r| r.kv_free_tokens), None);
    }

    fn counting(waiting: f64, generated: f64) -> Scrape {
        Scrape {
            alive: true,
            metrics: Some(EngineMetrics {
                waiting: Some(waiting),
                generated: Some(generated),
                ..EngineMetrics::default()
            }),
            slots: None,
        }
    }

    #[test]
    fn silence_is_excused_only_while_the_engine_queues_and_its_counter_moves() {
        let mut w = Watched::default();
        w.scraped(0.0, counting(2.0, 100.0), None);
        assert!(!w.queues_while_working(0.0, 60.0), "no move seen yet");
        w.scraped(0.5, counting(2.0, 104.0), None);
        assert!(w.queues_while_working(1.0, 60.0));
        assert!(!w.queues_while_working(61.0, 60.0), "metrics gone stale");
        w.scraped(30.0, counting(2.0, 104.0), None);
        assert!(w.queues_while_working(30.0, 60.0), "moved 29.5 s ago");
        assert!(
            !w.queues_while_working(30.0, 20.0),
            "not within a 20 s silence"
        );
        w.scraped(31.0, counting(0.0, 110.0), None);
        assert!(
            w.queues_while_working(31.0, 60.0),
            "just taken from the queue: silent until its first token"
        );
        assert!(
            !w.queues_while_working(31.0, 0.5),
            "nothing queued for a whole silence: a hang"
        );
        w.scraped(32.0, counting(1.0, 120.0), None);
        assert!(w.queues_while_working(32.0, 0.5));
        w.scraped(35.5, DEAD, None);
        assert!(w.silent());
        assert!(!w.queues_while_working(35.5, 60.0), "silent to its scrapes");
    }

    #[test]
    fn an_engine_without_a_token_counter_never_excuses_a_silence() {
        let mut w = Watched::default();
        for t in 0..10 {
            w.scraped(f64::from(t), waiting(3.0), None);
        }
        assert!(!w.queues_while_working(9.0, 60.0));
    }

    #[test]
    fn kv_use_and_slots_reach_the_report() {
        let mut w = Watched::default();
        let m = EngineMetrics {
            kv_used: Some(0.25),
            generated: Some(40.0),
            ..EngineMetrics::default()
        };
        let props = Scrape {
            alive: true,
            metrics: None,
            slots: Some(4),
        };
        let seen = w.scraped(0.0, props, None);
        assert_eq!(seen.report.and_then(|r| r.slots), Some(4), "said at once");
        let scrape = Scrape {
            metrics: Some(m),
            ..props
        };
        let seen = w.scraped(0.5, scrape, Some(1000));
        let r = seen.report.expect("a report");
        assert_eq!((r.kv_free_tokens, r.slots), (Some(750), Some(4)));
        assert_eq!(seen.generated, Some(40.0));
    }
}
