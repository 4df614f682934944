//! Hummingbird's idle-slice collector as a sans-IO machine: it follows an HP service's requests
//! through their device and CPU phases, learns the idle windows between them, and answers the
//! two questions of harvesting: how much LP work may start now ([`Collector::grant`]), and
//! whether LP work an HP kernel found on the device must be killed or may finish
//! ([`Collector::slack_covers`]).
//!
//! Drivers report what they see of the HP service: a request arrives (with its kernels'
//! lengths: profiled, as Hummingbird does, or learned), each kernel is queued, starts and ends,
//! the request finishes. The simulator's harvest model and `xsched bench harvest` report their
//! service directly; the `slo-aware` policy reports an HP queue's ready/idle transitions and
//! infers request boundaries (`policy/slo_aware.rs`). Nothing here reads a clock.

use super::learner::GapLearner;
use crate::time::Nanos;

/// What the collector knows of the device and the LP job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectorConfig {
    /// HP deadline: arrival + this.
    pub slo: Nanos,
    /// Slack kept in reserve whenever LP may delay HP.
    pub margin: Nanos,
    /// Device time lost per LP launch.
    pub launch_overhead: Nanos,
    /// LP slice length: the stop granularity of paced LP work.
    pub slice: Nanos,
    /// The LP kernel's unit of work (a block of its grid): the finest slice.
    pub tile: Nanos,
}

/// Refinements of the collector's rules for a device whose LP work stops at the next tile
/// checkpoint when asked (a Level 3 that keeps progress, as on the CPU device). Off by default,
/// as the simulator's harvest model and the `slo-aware` policy run the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollectorOptions {
    /// The driver stops LP work at its next tile checkpoint when HP needs the device, and asks
    /// again at each release's end. An overrun then delays an in-flight request by at most one
    /// tile and a launch (its kernel's wait-or-kill stops the rest at the next checkpoint), and
    /// a request arriving during it by what of that is left after its pre-processing (it needs
    /// the device only then, and is in flight, so judged by the slack, at the next decision):
    /// the overrun is one slice, priced at one tile. An HP kernel always stops LP work it finds
    /// ([`Collector::lp_may_finish`]).
    pub checkpointed: bool,
}

/// A predicted window of at least this many slices takes one merged launch instead of paced
/// slices: one launch overhead, but it can only be stopped by killing it.
pub const MERGE_SLICES: u64 = 8;

/// What a gap never observed is assumed to last: long enough that no deadline is met after it.
const UNKNOWN_GAP: Nanos = Nanos(u64::MAX / 8);

/// The standard normal's 99th percentile.
const Z_P99: f64 = 2.33;

/// LP work the collector admits now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// One launch of whole slices filling a long window; stopped early only by a kill.
    Merged(Nanos),
    /// `slices` slices launched one after another, `useful` work in all: stoppable at each
    /// slice boundary.
    Paced {
        /// Slices.
        slices: u64,
        /// Their work together (the last may be short).
        useful: Nanos,
    },
    /// One launch of whole tiles, shorter than a slice, fitted to a short window.
    Fitted(Nanos),
    /// One slice beyond the predicted window, admitted because every deadline's slack covers it.
    Overrun(Nanos),
}

impl Grant {
    /// The LP work it completes.
    pub fn useful(self) -> Nanos {
        match self {
            Grant::Merged(n) | Grant::Fitted(n) | Grant::Overrun(n) => n,
            Grant::Paced { useful, .. } => useful,
        }
    }
}

/// Where an in-flight HP request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// On the CPU since `since`, before kernel `next` (`next == 0`: pre-processing).
    Gap { next: usize, since: Nanos },
    /// Kernel `next` is queued (`queued`) or running.
    Device { next: usize, queued: bool },
    /// Past its last profiled kernel since `since`: post-processing.
    Post { next: usize, since: Nanos },
}

/// One HP request in flight.
#[derive(Debug, Clone)]
struct Request {
    key: u64,
    arrival: Nanos,
    kernels: Vec<Nanos>,
    phase: Phase,
    /// CPU time observed so far (pre-processing and gaps).
    cpu: Nanos,
}

impl Request {
    fn kernel(&self, k: usize) -> Nanos {
        self.kernels
            .get(k)
            .or(self.kernels.last())
            .copied()
            .unwrap_or(Nanos::ZERO)
    }
}

/// The collector: HP requests in flight, what was learned of their gaps, and the admission and
/// kill rules.
#[derive(Debug, Clone)]
pub struct Collector {
    cfg: CollectorConfig,
    options: CollectorOptions,
    /// Idle windows by position: 0 before the first kernel, `i` after kernel `i - 1`, and the
    /// number of kernels for post-processing.
    gaps: Vec<GapLearner>,
    /// What each completed request would have taken alone (kernels + observed CPU phases).
    alone: GapLearner,
    /// Time between consecutive arrivals.
    interarrival: GapLearner,
    last_arrival: Option<Nanos>,
    requests: Vec<Request>,
    /// Kernel lists of finished requests, reused by new ones (no allocation per request).
    spare: Vec<Vec<Nanos>>,
    /// HP kernel time queued, not yet started.
    queued: Nanos,
}

impl Collector {
    /// A collector that has seen nothing yet, with the default rules.
    pub fn new(cfg: CollectorConfig) -> Collector {
        Collector::with_options(cfg, CollectorOptions::default())
    }

    /// A collector that has seen nothing yet, with `options`.
    pub fn with_options(cfg: CollectorConfig, options: CollectorOptions) -> Collector {
        Collector {
            cfg,
            options,
            gaps: Vec::new(),
            alone: GapLearner::default(),
            interarrival: GapLearner::default(),
            last_arrival: None,
            requests: Vec::new(),
            spare: Vec::new(),
            queued: Nanos::ZERO,
        }
    }

    /// The configuration.
    pub fn config(&self) -> CollectorConfig {
        self.cfg
    }

    fn gap_mut(&mut self, position: usize) -> &mut GapLearner {
        if self.gaps.len() <= position {
            self.gaps.resize_with(position + 1, GapLearner::default);
        }
        &mut self.gaps[position]
    }

    fn gap(&self, position: usize) -> Option<&GapLearner> {
        self.gaps.get(position)
    }

    fn request_mut(&mut self, key: u64) -> Option<&mut Request> {
        self.requests.iter_mut().find(|r| r.key == key)
    }

    /// HP request `key` arrived at `now`; `kernels` are its kernels' lengths, in order.
    pub fn arrive(&mut self, now: Nanos, key: u64, kernels: &[Nanos]) {
        if let Some(last) = self.last_arrival.replace(now) {
            self.interarrival.observe(now.saturating_sub(last));
        }
        let mut list = self.spare.pop().unwrap_or_default();
        list.clear();
        list.extend_from_slice(kernels);
        self.requests.push(Request {
            key,
            arrival: now,
            kernels: list,
            phase: Phase::Gap {
                next: 0,
                since: now,
            },
            cpu: Nanos::ZERO,
        });
    }

    /// The request's next kernel was queued for the device: its CPU phase ended.
    pub fn kernel_queued(&mut self, now: Nanos, key: u64) {
        let Some(r) = self.request_mut(key) else {
            return;
        };
        let (next, since) = match r.phase {
            Phase::Gap { next, since } | Phase::Post { next, since } => (next, Some(since)),
            Phase::Device { next, .. } => (next + 1, None),
        };
        let kernel = r.kernel(next);
        r.phase = Phase::Device { next, queued: true };
        let observed = since.map(|s| now.saturating_sub(s));
        if let Some(gap) = observed {
            r.cpu += gap;
        }
        self.queued += kernel;
        if let Some(gap) = observed {
            self.gap_mut(next).observe(gap);
        }
    }

    /// The request's queued kernel started on the device.
    pub fn kernel_started(&mut self, key: u64) {
        let Some(r) = self.request_mut(key) else {
            return;
        };
        if let Phase::Device { next, queued: true } = r.phase {
            r.phase = Phase::Device {
                next,
                queued: false,
            };
            let kernel = r.kernel(next);
            self.queued = self.queued.saturating_sub(kernel);
        }
    }

    /// The request's kernel completed at `now`: a CPU phase begins (a gap, or post-processing
    /// after its last profiled kernel).
    pub fn kernel_done(&mut self, now: Nanos, key: u64) {
        self.kernel_started(key);
        let Some(r) = self.request_mut(key) else {
            return;
        };
        if let Phase::Device { next, .. } = r.phase {
            r.phase = if next + 1 >= r.kernels.len() {
                Phase::Post {
                    next: next + 1,
                    since: now,
                }
            } else {
                Phase::Gap {
                    next: next + 1,
                    since: now,
                }
            };
        }
    }

    /// The request completed at `now` (its post-processing ended). Returns its latency.
    pub fn finish(&mut self, now: Nanos, key: u64) -> Option<Nanos> {
        let i = self.requests.iter().position(|r| r.key == key)?;
        let r = self.requests.remove(i);
        let (position, tail) = match r.phase {
            Phase::Gap { next, since } | Phase::Post { next, since } => {
                (next, now.saturating_sub(since))
            }
            Phase::Device { next, queued } => {
                if queued {
                    self.queued = self.queued.saturating_sub(r.kernel(next));
                }
                (next + 1, Nanos::ZERO)
            }
        };
        self.gap_mut(position).observe(tail);
        let kernels = r.kernels.iter().fold(Nanos::ZERO, |a, &b| a + b);
        self.alone.observe(r.cpu + kernels + tail);
        self.spare.push(r.kernels);
        Some(now.saturating_sub(r.arrival))
    }

    /// HP requests in flight.
    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// Whether an HP kernel is queued or running.
    pub fn hp_on_device(&self) -> bool {
        self.requests
            .iter()
            .any(|r| matches!(r.phase, Phase::Device { .. }))
    }

    /// The predicted idle window from `now`: the shortest of every in-flight request's current
    /// gap (the 10th percentile learned at its position, less the time already spent) and of
    /// the time until the next request could need the device (the next arrival, predicted from
    /// recent inter-arrival times, plus its pre-processing).
    fn window(&self, now: Nanos) -> Nanos {
        let predict = |p: usize| self.gap(p).map_or(Nanos::ZERO, GapLearner::predict);
        let since_arrival = self
            .last_arrival
            .map_or(Nanos::ZERO, |a| now.saturating_sub(a));
        let mut window = self.interarrival.predict().saturating_sub(since_arrival) + predict(0);
        for r in &self.requests {
            if let Phase::Gap { next, since } = r.phase {
                let left = predict(next).saturating_sub(now.saturating_sub(since));
                window = window.min(left);
            }
        }
        window
    }

    /// The LP work to issue now, `left` being what remains of the current LP kernel; nothing
    /// while an HP kernel is queued or running. A window of several slices takes paced slices
    /// (a long one, [`MERGE_SLICES`] or more, one merged launch); a shorter window takes a
    /// shorter launch of whole tiles; with no window, one slice runs when every slack covers
    /// the delay.
    pub fn grant(&self, now: Nanos, left: Nanos) -> Option<Grant> {
        if self.hp_on_device() {
            return None;
        }
        let c = &self.cfg;
        let window = self.window(now);
        let merged = window.saturating_sub(c.launch_overhead).0 / c.slice.0.max(1);
        if merged >= MERGE_SLICES {
            return Some(Grant::Merged(Nanos(c.slice.0 * merged).min(left)));
        }
        let paced = window.0 / (c.launch_overhead + c.slice).0.max(1);
        if paced >= 1 {
            let slices = paced.min(left.0.div_ceil(c.slice.0.max(1)));
            let useful = Nanos(c.slice.0 * slices).min(left);
            return Some(Grant::Paced { slices, useful });
        }
        // A window shorter than a slice takes a shorter one, whole tiles, when that does at
        // least as much work as its launch costs.
        let room = window.saturating_sub(c.launch_overhead);
        let fitted = Nanos(room.0 / c.tile.0.max(1) * c.tile.0).min(left);
        if fitted >= c.launch_overhead.max(c.tile) {
            return Some(Grant::Fitted(fitted));
        }
        let one = c.slice.min(left);
        let stop = if self.options.checkpointed {
            c.tile.min(one)
        } else {
            one
        };
        let delay = (c.launch_overhead + stop).saturating_sub(window);
        (self.slack_covers(now, delay) && self.arrival_slack_covers(delay))
            .then_some(Grant::Overrun(one))
    }

    /// The wait-or-kill rule: whether LP work that an HP kernel found on the device, with
    /// `left` of its release to run, may finish. By default only if every slack covers `left`
    /// ([`Collector::slack_covers`]). With [`CollectorOptions::checkpointed`] never: stopped at
    /// its next checkpoint it keeps its progress, so finishing gains it nothing (its next release
    /// costs one launch overhead) and costs every request behind it the wait.
    pub fn lp_may_finish(&self, now: Nanos, left: Nanos) -> bool {
        !self.options.checkpointed && self.slack_covers(now, left)
    }

    /// Whether every in-flight request still meets its deadline (with the margin) if the device
    /// stays with LP for `delay` more.
    pub fn slack_covers(&self, now: Nanos, delay: Nanos) -> bool {
        self.requests.iter().all(|r| match self.remaining(now, r) {
            None => true,
            Some(remaining) => {
                let deadline = r.arrival + self.cfg.slo;
                let need = now
                    .saturating_add(remaining)
                    .saturating_add(self.queued + delay + self.cfg.margin);
                need <= deadline
            }
        })
    }

    /// Whether a request arriving now would still meet its deadline after `delay`, judging its
    /// length by the longest recent requests (their 90th percentile alone). With
    /// [`CollectorOptions::checkpointed`] only what of `delay` outlasts its pre-processing (the
    /// 10th percentile learned) counts: none of it, nothing is at stake.
    pub fn arrival_slack_covers(&self, delay: Nanos) -> bool {
        let mut delay = delay;
        if self.options.checkpointed {
            delay = delay.saturating_sub(self.gap(0).map_or(Nanos::ZERO, GapLearner::predict));
            if delay == Nanos::ZERO {
                return true;
            }
        }
        match self.alone.high() {
            Some(alone) => alone + delay + self.cfg.margin <= self.cfg.slo,
            None => false,
        }
    }

    /// Predicted time to the end of an in-flight request that still needs the device, at the
    /// 99th percentile: its kernels left, the rest of its current gap (90th percentile learned)
    /// and its later gaps as a sum (learned means plus 2.33 standard deviations of the sum: many
    /// gaps together vary far less than each one); `None` when it no longer needs the device. A
    /// gap never seen counts as unbounded, so nothing may delay a request the collector knows
    /// nothing about.
    fn remaining(&self, now: Nanos, r: &Request) -> Option<Nanos> {
        let (next, gap_left) = match r.phase {
            Phase::Post { .. } => return None,
            Phase::Device { next, .. } => (next, Nanos::ZERO),
            Phase::Gap { next, since } => (
                next,
                self.gap(next)
                    .and_then(GapLearner::high)
                    .unwrap_or(UNKNOWN_GAP)
                    .saturating_sub(now.saturating_sub(since)),
            ),
        };
        let (mut mean, mut var) = (0.0f64, 0.0f64);
        for p in next + 1..=r.kernels.len() {
            let (Some(m), Some(v)) = (
                self.gap(p).and_then(GapLearner::mean),
                self.gap(p).and_then(GapLearner::variance),
            ) else {
                return Some(UNKNOWN_GAP);
            };
            mean += m.0 as f64;
            var += v;
        }
        let later = Nanos((mean + Z_P99 * var.sqrt()) as u64);
        let kernels = r.kernels.iter().skip(next).fold(Nanos::ZERO, |a, &b| a + b);
        Some(kernels.saturating_add(gap_left).saturating_add(later))
    }
}

#[cfg(test)]
mod tests;
