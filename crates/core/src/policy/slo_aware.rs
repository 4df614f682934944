//! SLO-aware harvesting (Hummingbird) for real queues: the queues with an `Slo` hint (HP) are
//! never suspended; the others on their device (LP) run only in the HP service's idle windows
//! that the core's [`Collector`] predicts, or beyond them when every HP request's slack covers
//! the delay. It is the collector the simulator's harvest model and `xsched bench harvest`
//! drive, fed here from what a scheduler sees of a queue.
//!
//! What a scheduler sees is the HP queues' readiness, so the policy infers the service's
//! requests from it: an HP busy period is a kernel (the collector learns its length per
//! position), an idle period a CPU gap, and a request ends once the service has been idle longer
//! than the gaps inside its requests. That split is learned too: the geometric midpoint of the
//! widest jump (at least [`SPLIT_RATIO`]×) between recent idle periods, sorted; before one shows,
//! every busy period counts as a request. A request's deadline is its first command plus the
//! SLO (work before its first command is invisible: give the SLO that is left for the rest).
//!
//! A service that has stopped sending (idle for its SLO and for four times the longest idle
//! period it has shown) holds nothing back: LP then runs until HP has work (the next request
//! may wait one stop), so a service that stops never starves LP.
//!
//! LP runs for what the collector grants — a predicted window less [`DEFAULT_STOP`], the time a
//! suspended LP queue needs to leave the device (inside a request, windows only: the slack rule
//! that lets simulated LP slices overrun a window prices the stop exactly, which real queues
//! cannot promise) — and is suspended when the grant ends or an HP queue gets work, whichever
//! is first. Between requests,
//! when a request arriving now could absorb one such stop (the collector's arrival slack), LP
//! simply runs until HP has work. A suspend at the LP queue's level is the collector's kill
//! (Level 3 stops LP at its next checkpoint and keeps its progress; Level 1 lets its in-flight
//! commands drain). With the argument `between-requests` (`slo-aware:between-requests`) LP runs
//! only while no HP request is in flight: Hummingbird's temporal-sharing baseline, with the same
//! request inference.

use super::contract::{Policy, PolicyEntry};
use crate::error::CoreError;
use crate::harvest::{Collector, CollectorConfig, GapLearner, Grant};
use crate::ids::DeviceId;
use crate::view::QueueView;
use crate::time::Nanos;
use std::collections::VecDeque;

/// How long a suspended LP queue takes to leave the device (the suspend's delivery plus a
/// Level-3 checkpoint, or a short in-flight drain): a window must exceed it to be granted.
pub const DEFAULT_STOP: Nanos = Nanos::from_us(200);

/// Slack kept in reserve whenever LP may delay HP.
pub const DEFAULT_MARGIN: Nanos = Nanos::from_us(500);

/// The grain of grants beyond a predicted window (one LP "slice").
const SLICE: Nanos = Nanos::from_us(100);

/// Idle periods at least this many times longer than the next shorter one separate requests.
pub const SPLIT_RATIO: u64 = 4;

/// A service idle this many times its longest idle period seen (and its SLO) has stopped
/// sending.
const STOPPED_IDLES: u64 = 4;

/// Requests whose kernel counts are remembered.
const COUNTS: usize = 64;

/// When LP may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LpRule {
    /// In the collector's windows and slack (Hummingbird).
    Harvest,
    /// Only while no HP request is in flight.
    BetweenRequests,
}

/// What the policy follows of one device's HP service.
#[derive(Debug)]
struct HpTrack {
    device: DeviceId,
    collector: Collector,
    busy: bool,
    /// Since when the service is busy or idle.
    since: Nanos,
    /// The request in flight and how many busy periods it has had.
    request: Option<(u64, usize)>,
    next_key: u64,
    /// Every idle period between busy ones.
    idles: GapLearner,
    /// Busy periods by position in their request: the learned kernel profile.
    kernels: Vec<GapLearner>,
    /// Busy periods per finished request.
    counts: VecDeque<usize>,
    /// Idle periods longer than this end a request.
    split: Option<Nanos>,
    /// LP may run until then (a grant being used).
    lp_until: Option<Nanos>,
    /// The profile handed to the collector (kept to avoid allocating).
    profile: Vec<Nanos>,
}

/// `slo-aware` harvests idle slices between and within HP requests;
/// `slo-aware:between-requests` is its baseline (LP only between HP requests).
pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "slo-aware",
    argument: Some("between-requests"),
    build: |arg| match arg {
        None => Ok(Box::new(SloAware::harvest())),
        Some("between-requests") => Ok(Box::new(SloAware::between_requests())),
        Some(_) => Err("takes only `between-requests` (the baseline)"),
    },
}];

/// The `slo-aware` policy.
#[derive(Debug)]
pub struct SloAware {
    mode: LpRule,
    services: Vec<HpTrack>,
    next: Option<Nanos>,
}

impl SloAware {
    /// SLO-aware harvesting.
    pub fn harvest() -> SloAware {
        SloAware {
            mode: LpRule::Harvest,
            services: Vec::new(),
            next: None,
        }
    }

    /// LP only between HP requests (the baseline).
    pub fn between_requests() -> SloAware {
        SloAware {
            mode: LpRule::BetweenRequests,
            ..SloAware::harvest()
        }
    }
}

/// The split between gaps inside requests and the idle time between them, if the idle periods
/// fall into two groups: the geometric midpoint of the widest jump between consecutive ones.
fn split_of(idles: &GapLearner) -> Option<Nanos> {
    let sorted = idles.sorted();
    let (mut best, mut at) = (0.0f64, None);
    for w in sorted.windows(2) {
        let (lo, hi) = (w[0].0.max(1_000) as f64, w[1].0 as f64);
        let ratio = hi / lo;
        if ratio > best {
            best = ratio;
            at = Some((lo * hi).sqrt());
        }
    }
    at.filter(|_| best >= SPLIT_RATIO as f64)
        .map(|ns| Nanos(ns as u64))
}

impl HpTrack {
    fn new(device: DeviceId, slo: Nanos) -> HpTrack {
        HpTrack {
            device,
            collector: Collector::new(CollectorConfig {
                slo,
                margin: DEFAULT_MARGIN,
                launch_overhead: DEFAULT_STOP,
                slice: SLICE,
                tile: SLICE,
            }),
            busy: false,
            since: Nanos::ZERO,
            request: None,
            next_key: 0,
            idles: GapLearner::default(),
            kernels: Vec::new(),
            counts: VecDeque::new(),
            split: None,
            lp_until: None,
            profile: Vec::new(),
        }
    }

    /// The HP service got work at `now`: the next kernel of its request, or a new request.
    fn busy(&mut self, now: Nanos) {
        let idle = now.saturating_sub(self.since);
        if self.next_key > 1 || self.request.is_some_and(|(_, n)| n > 1) {
            self.idles.observe(idle);
            self.relearn_split();
        }
        let continues = self.split.is_some_and(|s| idle <= s);
        match self.request {
            Some((key, n)) if continues => {
                self.collector.kernel_queued(now, key);
                self.request = Some((key, n + 1));
            }
            _ => {
                self.finish(now);
                let key = self.next_key;
                self.next_key += 1;
                let expected = self.counts.iter().copied().max().unwrap_or(1);
                self.profile.clear();
                // The learned mean per position: the collector's slack rules add their own
                // margins (a sum of per-position highs would count every kernel's worst case).
                self.profile.extend((0..expected).map(|k| {
                    self.kernels
                        .get(k)
                        .and_then(GapLearner::mean)
                        .unwrap_or(Nanos::ZERO)
                }));
                self.collector.arrive(now, key, &self.profile);
                self.collector.kernel_queued(now, key);
                self.request = Some((key, 1));
            }
        }
        if let Some((key, _)) = self.request {
            self.collector.kernel_started(key);
        }
        self.busy = true;
        self.since = now;
        self.lp_until = None;
    }

    /// Recompute the request split; when it appears, vanishes or moves by more than 2×, what
    /// was learned under the old one (gaps by position, kernels, arrivals) no longer describes
    /// the service's requests and is dropped.
    fn relearn_split(&mut self) {
        let new = split_of(&self.idles);
        let moved = match (self.split, new) {
            (None, None) => false,
            (Some(a), Some(b)) => a.0.max(b.0) > 2 * a.0.min(b.0),
            _ => true,
        };
        self.split = new;
        if moved {
            self.collector = Collector::new(self.collector.config());
            self.kernels.clear();
            self.counts.clear();
            self.request = None;
        }
    }

    /// The HP service went idle at `now`: its kernel ended.
    fn idle(&mut self, now: Nanos) {
        if let Some((key, n)) = self.request {
            let position = n.saturating_sub(1);
            if self.kernels.len() <= position {
                self.kernels.resize_with(position + 1, GapLearner::default);
            }
            self.kernels[position].observe(now.saturating_sub(self.since));
            self.collector.kernel_done(now, key);
        }
        self.busy = false;
        self.since = now;
        if self.split.is_none() {
            self.finish(now);
        }
    }

    /// The request in flight is over; it ended when its last kernel did (what follows is idle
    /// time, not part of it).
    fn finish(&mut self, now: Nanos) {
        if let Some((key, n)) = self.request.take() {
            let ended = if self.busy { now } else { self.since };
            self.collector.finish(ended, key);
            if self.counts.len() == COUNTS {
                self.counts.pop_front();
            }
            self.counts.push_back(n);
        }
    }

    /// Follow the clock: a request ends once the service has been idle past the split.
    fn tick(&mut self, now: Nanos) {
        if !self.busy
            && self.request.is_some()
            && self
                .split
                .is_some_and(|s| now >= self.since.saturating_add(s))
        {
            self.finish(now);
        }
    }

    /// Whether LP may run now, and until when it must be asked again.
    fn lp_may_run(&mut self, mode: LpRule, now: Nanos) -> (bool, Option<Nanos>) {
        if self.busy {
            return (false, None);
        }
        let request_ends = self
            .request
            .and(self.split)
            .map(|s| self.since.saturating_add(s));
        match mode {
            LpRule::BetweenRequests => (self.request.is_none(), request_ends),
            LpRule::Harvest => {
                // Between requests, when the next one can absorb the time LP takes to leave
                // the device, LP runs until HP has work (a suspend is then the only delay).
                if self.request.is_none() && self.collector.arrival_slack_covers(DEFAULT_STOP) {
                    return (true, None);
                }
                // A service that has stopped sending (idle for its SLO and for several times the
                // longest idle period it has shown) has no request to protect but a next one,
                // which can wait one stop: LP runs until HP has work. Without this, a service
                // whose SLO leaves no slack for a stop would hold LP back for ever once it
                // stopped; with it, its ordinary gaps still hold LP back as before.
                let longest = self.idles.sorted().last().copied().unwrap_or(Nanos::ZERO);
                let quiet =
                    Nanos(longest.0.saturating_mul(STOPPED_IDLES)).max(self.collector.config().slo);
                let released = self.since.saturating_add(quiet);
                if self.request.is_none() && now >= released {
                    return (true, None);
                }
                if let Some(until) = self.lp_until.filter(|&u| u > now) {
                    return (true, Some(until));
                }
                // Inside a request, only windows: an LP intrusion beyond one costs the HP kernel
                // the stop, which on real queues (a suspend's delivery, a checkpoint, a daemon's
                // round trip) is longer and noisier than the slack rule can price.
                self.lp_until = self
                    .collector
                    .grant(now, Nanos::MAX)
                    .filter(|g| self.request.is_none() || !matches!(g, Grant::Overrun(_)))
                    .map(|g| now.saturating_add(g.useful()));
                match self.lp_until {
                    Some(until) => (true, Some(until)),
                    // A window may open once the request in flight ends; between requests, LP
                    // is released once the service has been idle for its SLO.
                    None if self.request.is_none() => (false, Some(released)),
                    None => (false, request_ends),
                }
            }
        }
    }
}

impl Policy for SloAware {
    fn name(&self) -> &'static str {
        "slo-aware"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.next = None;
        // Follow each device's HP service (the queues with an SLO).
        for q in queues.iter().filter(|q| q.hints.slo.is_some()) {
            let slo = queues
                .iter()
                .filter(|o| o.device == q.device)
                .filter_map(|o| o.hints.slo)
                .min()
                .unwrap_or(Nanos::MAX);
            if !self.services.iter().any(|s| s.device == q.device) {
                self.services.push(HpTrack::new(q.device, slo));
            }
        }
        self.services.retain(|s| {
            queues
                .iter()
                .any(|q| q.device == s.device && q.hints.slo.is_some())
        });
        let mode = self.mode;
        for s in &mut self.services {
            let busy = queues
                .iter()
                .any(|q| q.device == s.device && q.hints.slo.is_some() && q.ready);
            s.tick(now);
            match (s.busy, busy) {
                (false, true) => s.busy(now),
                (true, false) => s.idle(now),
                _ => {}
            }
            let (lp, again) = s.lp_may_run(mode, now);
            if let Some(t) = again {
                self.next = Some(self.next.map_or(t, |n| n.min(t)));
            }
            for (q, r) in queues.iter().zip(run.iter_mut()) {
                if q.device == s.device && q.hints.slo.is_none() {
                    *r = lp;
                }
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next
    }

    fn check(&self, queues: &[QueueView]) -> Result<(), CoreError> {
        if queues.is_empty() || queues.iter().any(|q| q.hints.slo.is_some()) {
            Ok(())
        } else {
            Err(CoreError::NoSloQueue {
                policy: "slo-aware",
                queues: queues.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests;
