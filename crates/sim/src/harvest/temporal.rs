//! One kernel at a time on the device: HP alone, native time slicing, fixed priority,
//! REEF-like reset and Hummingbird's SLO-aware harvesting, in one event loop whose only
//! difference between policies is what may start when the device frees and what happens to
//! running LP work when an HP kernel arrives. What the HP service does is reported to the
//! core's [`Collector`] as it happens; `priority` and `slo-aware` take their decisions from it.

use super::{HarvestRun, Params, SharePolicy};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use xsched_core::Nanos;
use xsched_core::harvest::{Collector, CollectorConfig, Grant};
use xsched_workload::service::HpRequest;

/// What the device is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DeviceActivity {
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

impl DeviceActivity {
    fn end(&self) -> Option<Nanos> {
        match *self {
            DeviceActivity::Idle => None,
            DeviceActivity::Hp { end, .. }
            | DeviceActivity::Lp { end, .. }
            | DeviceActivity::Lost { end } => Some(end),
        }
    }
}

/// A paced series of LP slices.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Paced {
    start: Nanos,
    slice: Nanos,
}

/// A timer: kernel `k` of `req` is submitted, or (`k == kernels`) `req` completes.
type Timer = Reverse<(Nanos, usize, usize)>;

struct Temporal<'a> {
    policy: SharePolicy,
    p: &'a Params,
    reqs: &'a [HpRequest],
    now: Nanos,
    next_arrival: usize,
    timers: BinaryHeap<Timer>,
    /// HP kernels waiting for the device: (request, kernel).
    queue: VecDeque<(usize, usize)>,
    /// What the scheduler knows of the HP service.
    collector: Collector,
    run: DeviceActivity,
    /// Timeslice: whether HP had the device last (a change of owner costs a switch).
    hp_owns: bool,
    /// The first queued HP kernel that found LP on the device, since when.
    blocked_since: Option<Nanos>,
    /// Work left in the current LP kernel.
    lp_left: Nanos,
    latencies: Vec<Option<Nanos>>,
    out: HarvestRun,
}

/// Run one temporal-sharing policy to the last HP completion.
pub(super) fn run(policy: SharePolicy, reqs: &[HpRequest], p: &Params) -> HarvestRun {
    let mut t = Temporal {
        policy,
        p,
        reqs,
        now: Nanos::ZERO,
        next_arrival: 0,
        timers: BinaryHeap::new(),
        queue: VecDeque::new(),
        collector: Collector::new(CollectorConfig {
            slo: p.slo,
            margin: p.margin,
            launch_overhead: p.launch_overhead,
            slice: p.slice,
            tile: p.tile,
        }),
        run: DeviceActivity::Idle,
        hp_owns: true,
        blocked_since: None,
        lp_left: p.lp_kernel,
        latencies: vec![None; reqs.len()],
        out: HarvestRun {
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
        self.next_arrival < self.reqs.len() || self.collector.in_flight() > 0
    }

    fn arrive(&mut self) {
        let req = self.next_arrival;
        self.next_arrival += 1;
        let r = &self.reqs[req];
        self.collector.arrive(self.now, req as u64, &r.kernels);
        self.timers.push(Reverse((self.now + r.pre, req, 0)));
    }

    fn timer(&mut self, req: usize, k: usize) {
        if k == self.reqs[req].kernels.len() {
            // Post-processing done: the request completes.
            self.latencies[req] = self.collector.finish(self.now, req as u64);
            return;
        }
        self.collector.kernel_queued(self.now, req as u64);
        self.queue.push_back((req, k));
        if matches!(
            self.run,
            DeviceActivity::Lp { .. } | DeviceActivity::Lost { .. }
        ) && !self.hp_owns
        {
            self.blocked_since.get_or_insert(self.now);
        }
    }

    fn device_done(&mut self) {
        match std::mem::replace(&mut self.run, DeviceActivity::Idle) {
            DeviceActivity::Hp { req, k, .. } => {
                let r = &self.reqs[req];
                self.out.hp_busy += r.kernels[k];
                self.collector.kernel_done(self.now, req as u64);
                let (after, next) = if k + 1 == r.kernels.len() {
                    (r.post, r.kernels.len())
                } else {
                    (r.gaps[k], k + 1)
                };
                self.timers.push(Reverse((self.now + after, req, next)));
            }
            DeviceActivity::Lp { useful, .. } => {
                self.out.lp_useful += useful;
                self.lp_left = self.lp_left.saturating_sub(useful);
                if self.lp_left == Nanos::ZERO {
                    self.lp_left = self.p.lp_kernel;
                }
            }
            DeviceActivity::Lost { .. } | DeviceActivity::Idle => {}
        }
    }

    /// Decide what the device does now.
    fn react(&mut self) {
        if matches!(self.run, DeviceActivity::Lp { .. }) && !self.queue.is_empty() {
            self.hp_waits_on_lp();
        }
        if self.run != DeviceActivity::Idle {
            return;
        }
        if let Some(&(req, k)) = self.queue.front() {
            if self.policy == SharePolicy::Timeslice && !self.hp_owns {
                self.hp_owns = true;
                self.run = DeviceActivity::Lost {
                    end: self.now + self.p.switch,
                };
                return;
            }
            self.queue.pop_front();
            self.collector.kernel_started(req as u64);
            self.hp_owns = true;
            if let Some(since) = self.blocked_since.take() {
                self.out.preempt_delays.push(self.now.saturating_sub(since));
            }
            self.run = DeviceActivity::Hp {
                req,
                k,
                end: self.now + self.reqs[req].kernels[k],
            };
            return;
        }
        if let Some(run) = self.lp_work() {
            if self.policy == SharePolicy::Timeslice && self.hp_owns {
                self.hp_owns = false;
                self.run = DeviceActivity::Lost {
                    end: self.now + self.p.switch,
                };
                return;
            }
            self.hp_owns = false;
            self.run = run;
        }
    }

    /// An HP kernel is queued behind running LP work: stop a paced series at its next slice
    /// boundary, and kill the work (losing it) when the policy says so.
    fn hp_waits_on_lp(&mut self) {
        let DeviceActivity::Lp {
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
                self.run = DeviceActivity::Lp {
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
            SharePolicy::SloAware => !self
                .collector
                .lp_may_finish(self.now, end.saturating_sub(self.now)),
            _ => false,
        };
        if kill {
            self.run = DeviceActivity::Lost {
                end: self.now + self.p.kill,
            };
        }
    }

    /// The LP work to start on an idle device with no HP kernel queued, if any.
    fn lp_work(&self) -> Option<DeviceActivity> {
        let p = self.p;
        let fresh = if self.lp_left == p.lp_kernel {
            p.launch_overhead
        } else {
            Nanos::ZERO
        };
        let one = |len: Nanos, overhead: Nanos| DeviceActivity::Lp {
            end: self.now + overhead + len,
            useful: len,
            paced: None,
        };
        match self.policy {
            SharePolicy::Standalone | SharePolicy::Spatial => None,
            SharePolicy::Reset => Some(one(self.lp_left, fresh)),
            SharePolicy::Timeslice => Some(one(self.lp_left.min(p.timeslice), fresh)),
            SharePolicy::Priority => (self.collector.in_flight() == 0)
                .then(|| one(p.slice.min(self.lp_left), p.launch_overhead)),
            SharePolicy::SloAware => {
                let grant = self.collector.grant(self.now, self.lp_left)?;
                Some(match grant {
                    Grant::Paced { slices, useful } => DeviceActivity::Lp {
                        end: self.now + Nanos(p.launch_overhead.0 * slices) + useful,
                        useful,
                        paced: Some(Paced {
                            start: self.now,
                            slice: p.slice,
                        }),
                    },
                    Grant::Merged(len) | Grant::Fitted(len) | Grant::Overrun(len) => {
                        one(len, p.launch_overhead)
                    }
                })
            }
        }
    }
}
