//! One kernel at a time on the device: HP alone, native time slicing, fixed priority,
//! REEF-like reset and Hummingbird's SLO-aware harvesting, in one event loop whose only
//! difference between policies is what may start when the device frees and what happens to
//! running LP work when an HP kernel arrives.

use super::workload::{GapLearner, HpRequest};
use super::{Outcome, Params, SharePolicy};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use xsched_core::Nanos;

/// What the device is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Run {
    Idle,
    /// HP kernel `k` of request `req`.
    Hp {
        req: usize,
        k: usize,
        end: Nanos,
    },
    /// LP work that completes `useful` of the LP job at `end` (launch overhead included);
    /// `paced`: a series of slices, each launched separately, so the run can stop at the next
    /// slice boundary.
    Lp {
        end: Nanos,
        useful: Nanos,
        paced: Option<Paced>,
    },
    /// Busy without useful work (a context switch, a kill) until `end`.
    Lost {
        end: Nanos,
    },
}

impl Run {
    fn end(&self) -> Option<Nanos> {
        match *self {
            Run::Idle => None,
            Run::Hp { end, .. } | Run::Lp { end, .. } | Run::Lost { end } => Some(end),
        }
    }
}

/// A paced series of LP slices.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Paced {
    start: Nanos,
    slice: Nanos,
}

/// A predicted window of at least this many slices takes one merged launch instead of paced
/// slices: one launch overhead, but it can only be stopped by killing it.
const MERGE_SLICES: u64 = 8;

/// Where an in-flight HP request is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// On the CPU since `since`, before kernel `next` (`next == 0`: pre-processing).
    Gap { next: usize, since: Nanos },
    /// Kernel `next` is queued or running.
    Device { next: usize },
    /// Post-processing after the last kernel, or finished.
    Post,
}

/// What a gap never observed is assumed to last: long enough that no deadline is met after it.
const UNKNOWN_GAP: Nanos = Nanos(u64::MAX / 8);

/// The standard normal's 99th percentile.
const Z_P99: f64 = 2.33;

/// A timer: kernel `k` of `req` is submitted, or (`k == kernels`) `req` completes.
type Timer = Reverse<(Nanos, usize, usize)>;

struct Temporal<'a> {
    policy: SharePolicy,
    p: &'a Params,
    reqs: &'a [HpRequest],
    now: Nanos,
    next_arrival: usize,
    timers: BinaryHeap<Timer>,
    queue: VecDeque<(usize, usize)>,
    phase: Vec<Phase>,
    /// Requests arrived and not completed.
    active: Vec<usize>,
    run: Run,
    /// Timeslice: whether HP had the device last (a change of owner costs a switch).
    hp_owns: bool,
    /// The first queued HP kernel that found LP on the device, since when.
    blocked_since: Option<Nanos>,
    /// Work left in the current LP kernel.
    lp_left: Nanos,
    /// Idle windows by position: 0 before the first kernel, `i` after kernel `i - 1`, and
    /// `kernels` for post-processing.
    gaps: Vec<GapLearner>,
    /// What each completed request would have taken alone (kernels + observed gaps).
    alone: GapLearner,
    /// Time between consecutive arrivals, and the last arrival.
    interarrival: GapLearner,
    last_arrival: Option<Nanos>,
    latencies: Vec<Option<Nanos>>,
    out: Outcome,
    dbg: (u64, u64, u64, u64, Option<Nanos>),
}

/// Run one temporal-sharing policy to the last HP completion.
pub(super) fn run(policy: SharePolicy, reqs: &[HpRequest], p: &Params) -> Outcome {
    let positions = reqs.iter().map(|r| r.kernels.len() + 1).max().unwrap_or(1);
    let mut t = Temporal {
        policy,
        p,
        reqs,
        now: Nanos::ZERO,
        next_arrival: 0,
        timers: BinaryHeap::new(),
        queue: VecDeque::new(),
        phase: vec![Phase::Post; reqs.len()],
        active: Vec::new(),
        run: Run::Idle,
        hp_owns: true,
        blocked_since: None,
        lp_left: p.lp_kernel,
        gaps: vec![GapLearner::default(); positions],
        alone: GapLearner::default(),
        interarrival: GapLearner::default(),
        last_arrival: None,
        latencies: vec![None; reqs.len()],
        dbg: (0, 0, 0, 0, None),
        out: Outcome {
            latencies: Vec::new(),
            hp_busy: Nanos::ZERO,
            lp_useful: Nanos::ZERO,
            window: Nanos::ZERO,
            preempt_delays: Vec::new(),
        },
    };
    t.react();
    while t.step() {
        t.react();
    }
    t.out.window = t.now;
    if std::env::var("XPDBG").is_ok() {
        eprintln!(
            "{:?} kills {} killed_ns {} slices {} idle_ns {}",
            policy, t.dbg.0, t.dbg.1, t.dbg.2, t.dbg.3
        );
    }
    t.out.latencies = t.latencies.into_iter().flatten().collect();
    t.out
}

impl Temporal<'_> {
    /// Advance to the next event and apply it; false when every request has completed.
    fn step(&mut self) -> bool {
        let arrival = self.reqs.get(self.next_arrival).map(|r| r.arrival);
        let timer = self.timers.peek().map(|Reverse((t, _, _))| *t);
        let device = self.run.end();
        let Some(next) = [device, timer, arrival].into_iter().flatten().min() else {
            return false;
        };
        self.now = next;
        if device == Some(next) {
            self.device_done();
        } else if timer == Some(next) {
            if let Some(Reverse((_, req, k))) = self.timers.pop() {
                self.timer(req, k);
            }
        } else {
            self.arrive();
        }
        self.next_arrival < self.reqs.len() || !self.active.is_empty()
    }

    fn arrive(&mut self) {
        let req = self.next_arrival;
        self.next_arrival += 1;
        self.active.push(req);
        if let Some(last) = self.last_arrival.replace(self.now) {
            self.interarrival.observe(self.now.saturating_sub(last));
        }
        self.phase[req] = Phase::Gap {
            next: 0,
            since: self.now,
        };
        self.timers
            .push(Reverse((self.now + self.reqs[req].pre, req, 0)));
    }

    fn timer(&mut self, req: usize, k: usize) {
        let r = &self.reqs[req];
        if k == r.kernels.len() {
            // Post-processing done: the request completes.
            self.gaps[k].observe(r.post);
            let alone = r.pre
                + r.kernels.iter().copied().fold(Nanos::ZERO, |a, b| a + b)
                + r.gaps.iter().copied().fold(Nanos::ZERO, |a, b| a + b)
                + r.post;
            self.alone.observe(alone);
            self.latencies[req] = Some(self.now.saturating_sub(r.arrival));
            self.phase[req] = Phase::Post;
            self.active.retain(|&a| a != req);
            return;
        }
        if let Phase::Gap { since, .. } = self.phase[req] {
            self.gaps[k].observe(self.now.saturating_sub(since));
        }
        self.phase[req] = Phase::Device { next: k };
        self.queue.push_back((req, k));
        if matches!(self.run, Run::Lp { .. } | Run::Lost { .. }) && !self.hp_owns {
            self.blocked_since.get_or_insert(self.now);
        }
    }

    fn device_done(&mut self) {
        match std::mem::replace(&mut self.run, Run::Idle) {
            Run::Hp { req, k, .. } => {
                let r = &self.reqs[req];
                self.out.hp_busy += r.kernels[k];
                if k + 1 == r.kernels.len() {
                    self.phase[req] = Phase::Post;
                    self.timers
                        .push(Reverse((self.now + r.post, req, r.kernels.len())));
                } else {
                    self.phase[req] = Phase::Gap {
                        next: k + 1,
                        since: self.now,
                    };
                    self.timers
                        .push(Reverse((self.now + r.gaps[k], req, k + 1)));
                }
            }
            Run::Lp { useful, .. } => {
                self.out.lp_useful += useful;
                self.lp_left = self.lp_left.saturating_sub(useful);
                if self.lp_left == Nanos::ZERO {
                    self.lp_left = self.p.lp_kernel;
                }
            }
            Run::Lost { .. } | Run::Idle => {}
        }
    }

    /// Decide what the device does now.
    fn react(&mut self) {
        if matches!(self.run, Run::Lp { .. }) && !self.queue.is_empty() {
            self.hp_waits_on_lp();
        }
        if self.run != Run::Idle {
            return;
        }
        if let Some(&(req, k)) = self.queue.front() {
            if self.policy == SharePolicy::Timeslice && !self.hp_owns {
                self.hp_owns = true;
                self.run = Run::Lost {
                    end: self.now + self.p.switch,
                };
                return;
            }
            self.queue.pop_front();
            self.hp_owns = true;
            if let Some(s) = self.dbg.4.take() {
                self.dbg.3 += self.now.saturating_sub(s).0;
            }
            if let Some(since) = self.blocked_since.take() {
                self.out.preempt_delays.push(self.now.saturating_sub(since));
            }
            self.run = Run::Hp {
                req,
                k,
                end: self.now + self.reqs[req].kernels[k],
            };
            return;
        }
        if let Some(run) = self.lp_work() {
            if self.policy == SharePolicy::Timeslice && self.hp_owns {
                self.hp_owns = false;
                self.run = Run::Lost {
                    end: self.now + self.p.switch,
                };
                return;
            }
            self.hp_owns = false;
            self.run = run;
            self.dbg.2 += 1;
            if let Some(s) = self.dbg.4.take() {
                self.dbg.3 += self.now.saturating_sub(s).0;
            }
        } else if self.run == Run::Idle && self.dbg.4.is_none() {
            self.dbg.4 = Some(self.now);
        }
    }

    /// An HP kernel is queued behind running LP work: stop a paced series at its next slice
    /// boundary, and kill the work (losing it) when the policy says so.
    fn hp_waits_on_lp(&mut self) {
        let Run::Lp {
            mut end,
            useful: _,
            paced,
        } = self.run
        else {
            return;
        };
        if let Some(Paced { start, slice }) = paced {
            let step = (self.p.launch_overhead + slice).0.max(1);
            let started = self.now.saturating_sub(start).0.div_ceil(step).max(1);
            let boundary = start + Nanos(started * step);
            if boundary < end {
                end = boundary;
                self.run = Run::Lp {
                    end,
                    useful: Nanos(started * slice.0),
                    paced: None,
                };
            }
        }
        let kill = match self.policy {
            SharePolicy::Reset => {
                self.lp_left = self.p.lp_kernel; // the kernel restarts from scratch
                true
            }
            SharePolicy::SloAware => !self.slack_covers(end.saturating_sub(self.now)),
            _ => false,
        };
        if kill {
            self.run = Run::Lost {
                end: self.now + self.p.kill,
            };
        }
    }

    /// The LP work to start on an idle device with no HP kernel queued, if any.
    fn lp_work(&self) -> Option<Run> {
        let p = self.p;
        let fresh = if self.lp_left == p.lp_kernel {
            p.launch_overhead
        } else {
            Nanos::ZERO
        };
        let one = |len: Nanos, overhead: Nanos| Run::Lp {
            end: self.now + overhead + len,
            useful: len,
            paced: None,
        };
        match self.policy {
            SharePolicy::Standalone | SharePolicy::Spatial => None,
            SharePolicy::Reset => Some(one(self.lp_left, fresh)),
            SharePolicy::Timeslice => Some(one(self.lp_left.min(p.timeslice), fresh)),
            SharePolicy::Priority => self
                .active
                .is_empty()
                .then(|| one(p.slice.min(self.lp_left), p.launch_overhead)),
            SharePolicy::SloAware => self.collect(),
        }
    }

    /// Hummingbird's idle-slice collector: the LP work to issue now, if any. It fits the
    /// predicted idle window: the shortest of every in-flight request's current gap and of the
    /// time until the next request could need the device (the next arrival, predicted from
    /// recent inter-arrival times, plus its pre-processing). A window of several slices takes
    /// paced slices (a long one, [`MERGE_SLICES`] or more, one merged launch); a shorter
    /// window takes a shorter slice of whole tiles; with no window, one slice runs when every
    /// slack covers the delay.
    fn collect(&self) -> Option<Run> {
        let p = self.p;
        let since_arrival = self
            .last_arrival
            .map_or(Nanos::ZERO, |a| self.now.saturating_sub(a));
        let mut window =
            self.interarrival.predict().saturating_sub(since_arrival) + self.gaps[0].predict();
        for &req in &self.active {
            if let Phase::Gap { next, since } = self.phase[req] {
                let left = self.gaps[next]
                    .predict()
                    .saturating_sub(self.now.saturating_sub(since));
                window = window.min(left);
            }
        }
        let left = self.lp_left;
        let single = |len: Nanos| Run::Lp {
            end: self.now + p.launch_overhead + len,
            useful: len,
            paced: None,
        };
        let merged = window.saturating_sub(p.launch_overhead).0 / p.slice.0.max(1);
        if merged >= MERGE_SLICES {
            return Some(single(Nanos(p.slice.0 * merged).min(left)));
        }
        let paced = window.0 / (p.launch_overhead + p.slice).0.max(1);
        if paced >= 1 {
            let n = paced.min(left.0.div_ceil(p.slice.0.max(1)));
            let useful = Nanos(p.slice.0 * n).min(left);
            return Some(Run::Lp {
                end: self.now + Nanos((p.launch_overhead.0) * n) + useful,
                useful,
                paced: Some(Paced {
                    start: self.now,
                    slice: p.slice,
                }),
            });
        }
        // A window shorter than a slice takes a shorter one, whole tiles, when that does at
        // least as much work as its launch costs.
        let room = window.saturating_sub(p.launch_overhead);
        let fitted = Nanos(room.0 / p.tile.0.max(1) * p.tile.0).min(left);
        if fitted >= p.launch_overhead.max(p.tile) {
            return Some(single(fitted));
        }
        let one = p.slice.min(left);
        let delay = (p.launch_overhead + one).saturating_sub(window);
        (self.slack_covers(delay) && self.arrival_slack_covers(delay)).then(|| single(one))
    }

    /// Whether every in-flight request still meets its deadline (with the margin) if the
    /// device stays with LP for `delay` more.
    fn slack_covers(&self, delay: Nanos) -> bool {
        let queued: Nanos = self
            .queue
            .iter()
            .fold(Nanos::ZERO, |a, &(r, k)| a + self.reqs[r].kernels[k]);
        self.active.iter().all(|&req| match self.remaining(req) {
            None => true,
            Some(remaining) => {
                let deadline = self.reqs[req].arrival + self.p.slo;
                let need = self
                    .now
                    .saturating_add(remaining)
                    .saturating_add(queued + delay + self.p.margin);
                need <= deadline
            }
        })
    }

    /// Whether a request arriving now would still meet its deadline after `delay`, judging its
    /// length by the longest recent requests (their 90th percentile alone).
    fn arrival_slack_covers(&self, delay: Nanos) -> bool {
        match self.alone.high() {
            Some(alone) => alone + delay + self.p.margin <= self.p.slo,
            None => false,
        }
    }

    /// Predicted time to the end of an in-flight request that still needs the device, at the
    /// 99th percentile: its kernels left (profiled), the rest of its current gap (90th
    /// percentile learned) and its later gaps as a sum (learned means plus 2.33 standard
    /// deviations of the sum: many gaps together vary far less than each one); `None` when it
    /// no longer needs the device. A gap never seen counts as unbounded, so nothing may delay
    /// a request the collector knows nothing about; a slice that would still make an HP kernel
    /// late when it arrives is killed.
    fn remaining(&self, req: usize) -> Option<Nanos> {
        let r = &self.reqs[req];
        let (next, gap_left) = match self.phase[req] {
            Phase::Post => return None,
            Phase::Device { next } => (next, Nanos::ZERO),
            Phase::Gap { next, since } => (
                next,
                self.gaps[next]
                    .high()
                    .unwrap_or(UNKNOWN_GAP)
                    .saturating_sub(self.now.saturating_sub(since)),
            ),
        };
        let (mut mean, mut var) = (0.0f64, 0.0f64);
        for g in &self.gaps[next + 1..=r.kernels.len()] {
            let (Some(m), Some(v)) = (g.mean(), g.variance()) else {
                return Some(UNKNOWN_GAP);
            };
            mean += m.0 as f64;
            var += v;
        }
        let later = Nanos((mean + Z_P99 * var.sqrt()) as u64);
        let kernels = r.kernels[next..].iter().fold(Nanos::ZERO, |a, &b| a + b);
        Some(kernels.saturating_add(gap_left).saturating_add(later))
    }
}
