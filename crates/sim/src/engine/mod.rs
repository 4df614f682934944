//! The deterministic event loop: virtual time, a heap of `(time, sequence)` events, and the
//! core's `LaunchMachine`s and `Dispatcher` driven exactly as the real runtime drives them.
//!
//! Per command the loop handles a launch (after the launcher's CPU cost), a device completion,
//! and for synchronization points an observation (after the sync cost). Scheduler operations
//! reach their queue after the scheduler's latency; Level-2/3 hardware effects take the
//! device's deactivate/interrupt/restore time. Nothing reads a real clock.

mod commands;
mod hw;
mod probe;
mod requests;
mod setup;

use crate::device::{Device, HwCmd};
use crate::error::ScenarioError;
use crate::metrics::WorkloadMetrics;
use crate::spec::SimSpec;
use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use xsched_core::{CommandId, Dispatcher, LaunchMachine, Level, Nanos, Operation, QueueEvent};
use xsched_workload::SeededRng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrival(u32),
    Launch(u32),
    Device(u16),
    Observe(u32, u64),
    Apply(u32, bool),
    Protect(u32, bool),
    Hw(u32, HwEffect),
    SchedTimer,
    Probe(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HwEffect {
    Deactivate,
    Interrupt,
    Restore,
}

#[derive(Debug, Clone, Copy)]
struct StageEnd {
    last: CommandId,
    workload: u32,
    stage: u32,
    arrival: Nanos,
}

struct XQ {
    m: LaunchMachine,
    device: usize,
    hwq: usize,
    launch_cost: Nanos,
    sync_cost: Nanos,
    scheduled: bool,
    declared: bool,
    launching: bool,
    durations: VecDeque<(Nanos, bool)>,
    stage_ends: VecDeque<StageEnd>,
    work_done: Nanos,
}

struct ProbeState {
    xq: usize,
    left: u32,
    started: Option<Nanos>,
    hist: Histogram<u64>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Per workload, in spec order.
    pub workloads: Vec<WorkloadMetrics>,
    /// Standalone work the device completed per queue inside the measurement window.
    pub queue_work: Vec<Nanos>,
    /// Device busy time over the whole run, in spec order.
    pub device_busy: Vec<Nanos>,
    /// Preemption latencies, if a probe ran.
    pub preemption: Option<Histogram<u64>>,
    /// Events processed.
    pub events: u64,
    /// Virtual time at the end.
    pub end: Nanos,
    /// Length of the measurement window.
    pub window: Nanos,
}

/// A simulation in progress.
pub struct Sim {
    spec: SimSpec,
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Reverse<(Nanos, u64, Ev)>>,
    rng: SeededRng,
    /// Per workload, when the spec asks for streams of their own.
    workload_rngs: Vec<SeededRng>,
    devices: Vec<Device>,
    device_next: Vec<Option<Nanos>>,
    /// Per device with a shared launcher: when it is next free.
    launcher_free: Vec<Nanos>,
    xqs: Vec<XQ>,
    sched: Option<Dispatcher<u32>>,
    sched_timer: Option<Nanos>,
    metrics: Vec<WorkloadMetrics>,
    probe: Option<ProbeState>,
    done_buf: Vec<HwCmd>,
    events: u64,
}

impl Sim {
    /// Check a spec and set up the run.
    pub fn new(spec: SimSpec) -> Result<Sim, ScenarioError> {
        let devices: Vec<Device> = spec
            .devices
            .iter()
            .map(|d| Device::new(d.arbitration, d.max_level == Level::Interrupt))
            .collect();
        let mut sim = Sim {
            now: Nanos::ZERO,
            seq: 0,
            heap: BinaryHeap::new(),
            rng: SeededRng::new(spec.seed),
            workload_rngs: if spec.own_streams {
                (0..spec.workloads.len() as u64)
                    .map(|w| SeededRng::new(spec.seed ^ (w + 1).wrapping_mul(STREAM_SPACING)))
                    .collect()
            } else {
                Vec::new()
            },
            device_next: vec![None; devices.len()],
            launcher_free: vec![Nanos::ZERO; devices.len()],
            devices,
            xqs: Vec::new(),
            sched: None,
            sched_timer: None,
            metrics: vec![WorkloadMetrics::default(); spec.workloads.len()],
            probe: None,
            done_buf: Vec::new(),
            events: 0,
            spec,
        };
        if let Some(policy) = &sim.spec.policy {
            sim.sched = Some(Dispatcher::new(policy.build()));
        }
        for qi in 0..sim.spec.queues.len() {
            sim.add_queue(qi)?;
        }
        for wi in 0..sim.spec.workloads.len() {
            sim.add_workload(wi)?;
        }
        sim.add_probe()?;
        Ok(sim)
    }

    /// The random stream workload `w` draws from.
    fn rng_of(&mut self, w: usize) -> &mut SeededRng {
        match self.workload_rngs.get_mut(w) {
            Some(r) => r,
            None => &mut self.rng,
        }
    }

    fn push(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// Run to the end and report.
    pub fn run(mut self) -> SimResult {
        let end = self.spec.duration;
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            if t > end {
                break;
            }
            self.now = t;
            match ev {
                Ev::Device(d) => {
                    if self.device_next[d as usize] != Some(t) {
                        continue;
                    }
                    self.device_next[d as usize] = None;
                    self.touch_device(d as usize);
                }
                Ev::SchedTimer => {
                    if self.sched_timer != Some(t) {
                        continue;
                    }
                    self.sched_timer = None;
                    if let Some(s) = self.sched.as_mut() {
                        s.timeout(t);
                    }
                }
                Ev::Arrival(w) => self.arrival(w as usize),
                Ev::Launch(q) => self.launch(q as usize),
                Ev::Observe(q, cmd) => self.observe(q as usize, CommandId(cmd)),
                Ev::Apply(q, suspend) => self.apply(q as usize, suspend),
                Ev::Protect(q, on) => {
                    self.xqs[q as usize].m.set_protected(on);
                    self.kick(q as usize);
                }
                Ev::Hw(q, effect) => self.hw_effect(q as usize, effect),
                Ev::Probe(suspend) => {
                    if !self.probe_step(suspend) {
                        self.events += 1;
                        break;
                    }
                }
            }
            self.events += 1;
            self.drain_scheduler();
        }
        self.finish(end)
    }

    fn finish(mut self, end: Nanos) -> SimResult {
        let end = self.now.max(end.min(self.now.max(self.spec.warmup)));
        // Requests still unfinished count with their age as a latency lower bound.
        for xq in &self.xqs {
            for s in &xq.stage_ends {
                if s.arrival >= self.spec.warmup {
                    let deadline = self.spec.workloads[s.workload as usize].deadline;
                    let m = &mut self.metrics[s.workload as usize];
                    m.unfinished += 1;
                    if deadline.is_some_and(|d| s.arrival.saturating_add(d) <= end) {
                        m.unfinished_late += 1;
                    }
                    m.record(end.saturating_sub(s.arrival));
                }
            }
        }
        SimResult {
            workloads: self.metrics,
            queue_work: self.xqs.iter().map(|x| x.work_done).collect(),
            device_busy: self.devices.iter().map(Device::busy).collect(),
            preemption: self.probe.map(|p| p.hist),
            events: self.events,
            end,
            window: end.saturating_sub(self.spec.warmup),
        }
    }

    fn drain_scheduler(&mut self) {
        let Some(s) = self.sched.as_mut() else {
            return;
        };
        let at = self.now + self.spec.sched_latency;
        let (heap, seq) = (&mut self.heap, &mut self.seq);
        s.dispatch(|&q, op| {
            let ev = match op {
                Operation::Suspend(_) => Ev::Apply(q, true),
                Operation::Resume(_) => Ev::Apply(q, false),
                Operation::Protect(_) => Ev::Protect(q, true),
                Operation::Unprotect(_) => Ev::Protect(q, false),
            };
            *seq += 1;
            heap.push(Reverse((at, *seq, ev)));
        });
        if let Some(t) = s.next_timer() {
            let t = t.max(self.now);
            if self.sched_timer != Some(t) {
                self.sched_timer = Some(t);
                self.push(t, Ev::SchedTimer);
            }
        }
    }

    fn notify(&mut self, xq: usize, event: QueueEvent) {
        if !self.xqs[xq].scheduled {
            return;
        }
        if let Some(s) = self.sched.as_mut() {
            // Queues were registered at set-up, so the core cannot reject these events.
            let _ = s.event(self.now, event);
        }
    }
}

/// Spreads the seeds of workloads' own streams (an odd 64-bit constant: the golden ratio's).
const STREAM_SPACING: u64 = 0x9E37_79B9_7F4A_7C15;

/// Set up and run in one call.
pub fn simulate(spec: SimSpec) -> Result<SimResult, ScenarioError> {
    Ok(Sim::new(spec)?.run())
}
