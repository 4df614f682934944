//! The deterministic event loop: virtual time, a heap of `(time, sequence)` events, and the
//! core's `LaunchMachine`s and `Dispatcher` driven exactly as the real runtime drives them.
//!
//! Per command the loop handles a launch (after the launcher's CPU cost), a device completion,
//! and for synchronization points an observation (after the sync cost). Scheduler operations
//! reach their queue after the scheduler's latency; Level-2/3 hardware effects take the
//! device's deactivate/interrupt/restore time. Nothing reads a real clock.

use crate::device::{Device, HwCmd};
use crate::metrics::WorkloadMetrics;
use crate::spec::{Arrival, QueueMode, SimSpec};
use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use thiserror::Error;
use xsched_core::{
    CommandId, CommandMeta, CoreError, DeviceId, Dispatcher, Event, HwAction, LaunchConfig,
    LaunchMachine, Level, Nanos, Operation, QueueId,
};
use xsched_report::new_histogram;
use xsched_workload::SeededRng;

/// Why a run could not start.
#[derive(Debug, Error)]
pub enum SimError {
    /// The core rejected something (unknown policy, unsupported level, ...).
    #[error("queue `{queue}`: {source}")]
    Core {
        /// The queue concerned.
        queue: String,
        /// What the core said.
        source: CoreError,
    },
    /// An index points nowhere.
    #[error("{0}")]
    Invalid(String),
}

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
    pub fn new(spec: SimSpec) -> Result<Sim, SimError> {
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

    /// Check workload `wi` of the spec and schedule its first arrival.
    fn add_workload(&mut self, wi: usize) -> Result<(), SimError> {
        let w = &self.spec.workloads[wi];
        if w.stages.is_empty() || w.stages.iter().any(|s| s.commands == 0) {
            return Err(SimError::Invalid(format!(
                "workload `{}` needs at least one stage of at least one command",
                w.name
            )));
        }
        if let Arrival::Poisson { rate_per_s }
        | Arrival::Uniform { rate_per_s }
        | Arrival::Paced { rate_per_s } = w.arrival
            && !(rate_per_s.is_finite() && rate_per_s > 0.0)
        {
            return Err(SimError::Invalid(format!(
                "workload `{}`: rate {rate_per_s} per second is not a positive number",
                w.name
            )));
        }
        if let Some(s) = w.stages.iter().find(|s| s.queue >= self.xqs.len()) {
            return Err(SimError::Invalid(format!(
                "workload `{}` names queue {} of {}",
                w.name,
                s.queue,
                self.xqs.len()
            )));
        }
        // Open-loop streams start at staggered nanoseconds so ties never depend on order.
        let first = match w.arrival {
            Arrival::Closed { .. } => Nanos::ZERO,
            _ => Nanos(wi as u64),
        };
        self.push(first, Ev::Arrival(wi as u32));
        Ok(())
    }

    /// Set up the spec's preemption probe, if any, and schedule its first request.
    fn add_probe(&mut self) -> Result<(), SimError> {
        if let Some(p) = self.spec.probe {
            if p.queue >= self.xqs.len() {
                return Err(SimError::Invalid(format!("probe names queue {}", p.queue)));
            }
            self.probe = Some(ProbeState {
                xq: p.queue,
                left: p.count,
                started: None,
                hist: new_histogram(),
            });
            let first = self.spec.warmup + self.rng.between(Nanos::ZERO, p.gap_max);
            self.push(first, Ev::Probe(true));
        }
        Ok(())
    }

    fn add_queue(&mut self, qi: usize) -> Result<(), SimError> {
        let q = &self.spec.queues[qi];
        let Some(dev) = self.spec.devices.get(q.device) else {
            return Err(SimError::Invalid(format!(
                "queue `{}` names device {} of {}",
                q.name,
                q.device,
                self.spec.devices.len()
            )));
        };
        let core_err = |source| SimError::Core {
            queue: q.name.clone(),
            source,
        };
        let (config, level, scheduled, cost) = match q.mode {
            QueueMode::Native => (LaunchConfig::UNBOUNDED, Level::Block, false, dev.launch),
            QueueMode::XQueue { config, level } => {
                xsched_core::Capabilities {
                    max_level: dev.max_level,
                    native_arbitration: String::new(),
                    preemption_unit: String::new(),
                    keeps_state: false,
                    hardware_priority: false,
                }
                .check_level(level)
                .map_err(core_err)?;
                (
                    config,
                    level,
                    self.sched.is_some(),
                    dev.launch + dev.intercept,
                )
            }
        };
        if let Some(s) = self.sched.as_mut().filter(|_| scheduled) {
            s.register(
                Nanos::ZERO,
                QueueId(qi as u32),
                DeviceId(q.device as u16),
                q.hints,
                qi as u32,
            )
            .map_err(core_err)?;
        }
        let hwq = self.devices[q.device].add_queue();
        self.xqs.push(XQ {
            m: LaunchMachine::new(config, level),
            device: q.device,
            hwq,
            launch_cost: cost,
            sync_cost: dev.sync,
            scheduled,
            declared: q.declared_estimates,
            launching: false,
            durations: VecDeque::new(),
            stage_ends: VecDeque::new(),
            work_done: Nanos::ZERO,
        });
        Ok(())
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

    fn notify(&mut self, xq: usize, event: Event) {
        if !self.xqs[xq].scheduled {
            return;
        }
        if let Some(s) = self.sched.as_mut() {
            // Queues were registered at set-up, so the core cannot reject these events.
            let _ = s.event(self.now, event);
        }
    }

    fn arrival(&mut self, w: usize) {
        let now = self.now;
        self.submit_stage(w, 0, now);
        let next = match self.spec.workloads[w].arrival {
            Arrival::Poisson { rate_per_s } => {
                let mean = Nanos::from_us_f64(1e6 / rate_per_s);
                Some(now + self.rng_of(w).exponential(mean))
            }
            Arrival::Uniform { rate_per_s } => Some(now + Nanos::from_us_f64(1e6 / rate_per_s)),
            Arrival::Closed { .. } | Arrival::Paced { .. } => None,
        };
        if let Some(t) = next.filter(|t| *t < self.spec.duration) {
            self.push(t, Ev::Arrival(w as u32));
        }
    }

    fn submit_stage(&mut self, w: usize, stage: usize, arrival: Nanos) {
        let spec = &self.spec.workloads[w];
        let st = spec.stages[stage];
        let idempotent = spec.idempotent;
        let q = st.queue;
        let mut last = None;
        let mut became_ready = false;
        for _ in 0..st.commands {
            let work = self.rng_of(w).between(st.cmd_min, st.cmd_max);
            let xq = &mut self.xqs[q];
            let meta = CommandMeta {
                estimate: if xq.declared { work } else { Nanos::ZERO },
                idempotent,
                ..CommandMeta::default()
            };
            let (id, was_idle) = xq.m.submit(meta);
            xq.durations.push_back((work, idempotent));
            became_ready |= was_idle;
            last = Some(id);
        }
        let Some(last) = last else {
            return; // unreachable: stages were checked non-empty in `Sim::new`
        };
        self.xqs[q].stage_ends.push_back(StageEnd {
            last,
            workload: w as u32,
            stage: stage as u32,
            arrival,
        });
        if became_ready {
            self.notify(q, Event::Ready(QueueId(q as u32)));
        }
        self.kick(q);
    }

    fn stage_done(&mut self, w: usize, stage: usize, arrival: Nanos) {
        let spec = &self.spec.workloads[w];
        if stage + 1 < spec.stages.len() {
            self.submit_stage(w, stage + 1, arrival);
            return;
        }
        let deadline = spec.deadline;
        let arrival_kind = spec.arrival;
        let latency = self.now - arrival;
        if arrival >= self.spec.warmup {
            let now = self.now;
            let m = &mut self.metrics[w];
            m.record(latency);
            m.completed_at(now);
            m.completed += 1;
            if deadline.is_some_and(|d| latency <= d) {
                m.on_time += 1;
            }
        }
        match arrival_kind {
            Arrival::Closed { think } if think == Nanos::ZERO => {
                // Back to back: the application submits the next request before it could look
                // idle to the scheduler.
                let now = self.now;
                self.submit_stage(w, 0, now);
            }
            Arrival::Closed { think } => {
                let t = self.now + think;
                self.push(t, Ev::Arrival(w as u32));
            }
            Arrival::Paced { rate_per_s } => {
                let t = next_tick(self.now, arrival, Nanos::from_us_f64(1e6 / rate_per_s));
                if t < self.spec.duration {
                    self.push(t, Ev::Arrival(w as u32));
                }
            }
            Arrival::Poisson { .. } | Arrival::Uniform { .. } => {}
        }
    }

    fn kick(&mut self, q: usize) {
        let xq = &mut self.xqs[q];
        if !xq.launching && xq.m.can_launch() {
            xq.launching = true;
            let d = xq.device;
            let at = if self.spec.devices[d].shared_launcher && xq.scheduled {
                // One dispatcher for the device's queues: launches wait their turn.
                let at = self.now.max(self.launcher_free[d]) + xq.launch_cost;
                self.launcher_free[d] = at;
                at
            } else {
                self.now + xq.launch_cost
            };
            self.push(at, Ev::Launch(q as u32));
        }
    }

    fn launch(&mut self, q: usize) {
        let now = self.now;
        let xq = &mut self.xqs[q];
        xq.launching = false;
        let Some(l) = xq.m.poll_launch(now) else {
            return;
        };
        let (work, idempotent) = xq.durations.pop_front().unwrap_or((Nanos::ZERO, false));
        let (d, hwq) = (xq.device, xq.hwq);
        // The application waits for each request stage's result (a stream or event sync), so
        // its last command is observed even when more work is already queued behind it.
        let ends_stage = xq
            .stage_ends
            .iter()
            .rev()
            .take_while(|s| s.last >= l.cmd)
            .any(|s| s.last == l.cmd);
        let sync = l.sync || ends_stage;
        self.devices[d].push(hwq, HwCmd::new(q as u32, l.cmd, work, sync, idempotent));
        self.touch_device(d);
        self.kick(q);
    }

    fn touch_device(&mut self, d: usize) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.done_buf);
        let next = self.devices[d].step(now, &mut done);
        let in_window = now >= self.spec.warmup;
        for c in done.drain(..) {
            if in_window {
                self.xqs[c.xq as usize].work_done += c.work;
            }
            if c.sync {
                let at = now + self.xqs[c.xq as usize].sync_cost;
                self.push(at, Ev::Observe(c.xq, c.cmd.0));
            }
        }
        self.done_buf = done;
        if next != self.device_next[d] {
            self.device_next[d] = next;
            if let Some(t) = next {
                self.push(t, Ev::Device(d as u16));
            }
        }
        self.check_probe(d);
    }

    fn observe(&mut self, q: usize, cmd: CommandId) {
        let now = self.now;
        let xq = &mut self.xqs[q];
        let Some(synced) = xq.m.on_synced(cmd, now) else {
            return;
        };
        let mut finished: [Option<StageEnd>; 4] = [None; 4];
        loop {
            let mut n = 0;
            let xq = &mut self.xqs[q];
            while n < finished.len() && xq.stage_ends.front().is_some_and(|s| s.last <= synced.last)
            {
                finished[n] = xq.stage_ends.pop_front();
                n += 1;
            }
            if n == 0 {
                break;
            }
            for s in finished.iter().take(n).flatten() {
                self.stage_done(s.workload as usize, s.stage as usize, s.arrival);
            }
        }
        if self.xqs[q].m.is_idle() {
            self.notify(q, Event::Idle(QueueId(q as u32)));
        }
        self.kick(q);
    }

    fn apply(&mut self, q: usize, suspend: bool) {
        let action = if suspend {
            self.xqs[q].m.suspend()
        } else {
            self.xqs[q].m.resume()
        };
        self.execute(q, action);
        if !suspend {
            self.kick(q);
        }
    }

    /// Carry out what the launch machine asked of the hardware, after the device's latency.
    fn execute(&mut self, q: usize, action: HwAction) {
        let dev = &self.spec.devices[self.xqs[q].device];
        let (deactivate, interrupt, restore) = (dev.deactivate, dev.interrupt, dev.restore);
        match action {
            HwAction::Nothing => {}
            HwAction::Deactivate => {
                self.push(
                    self.now + deactivate,
                    Ev::Hw(q as u32, HwEffect::Deactivate),
                );
            }
            HwAction::Interrupt => {
                self.push(self.now + interrupt, Ev::Hw(q as u32, HwEffect::Interrupt));
            }
            HwAction::Reactivate => self.set_hw(q, HwEffect::Restore),
            HwAction::Restore => {
                self.push(self.now + restore, Ev::Hw(q as u32, HwEffect::Restore));
            }
        }
    }

    fn hw_effect(&mut self, q: usize, effect: HwEffect) {
        // A late effect that the queue's state has since overtaken is dropped.
        let suspended = self.xqs[q].m.is_suspended();
        let wants_suspended = effect != HwEffect::Restore;
        if suspended == wants_suspended {
            self.set_hw(q, effect);
        }
    }

    fn set_hw(&mut self, q: usize, effect: HwEffect) {
        let (d, hwq) = (self.xqs[q].device, self.xqs[q].hwq);
        let now = self.now;
        let dev = &mut self.devices[d];
        match effect {
            HwEffect::Deactivate => dev.set_deactivated(now, hwq, true),
            HwEffect::Interrupt => {
                dev.set_deactivated(now, hwq, true);
                dev.set_interrupted(now, hwq, true);
            }
            HwEffect::Restore => {
                dev.set_interrupted(now, hwq, false);
                dev.set_deactivated(now, hwq, false);
            }
        }
        self.touch_device(d);
    }

    /// Returns false when the probe has all its measurements.
    fn probe_step(&mut self, suspend: bool) -> bool {
        let Some(p) = self.probe.as_mut() else {
            return true;
        };
        let xq = p.xq;
        if suspend {
            if p.left == 0 {
                return false;
            }
            p.started = Some(self.now);
            self.apply(xq, true);
            let d = self.xqs[xq].device;
            self.check_probe(d);
        } else {
            self.apply(xq, false);
            let gap = self.spec.probe.map_or(Nanos::ZERO, |s| s.gap_max);
            let at = self.now + self.rng.between(Nanos::ZERO, gap);
            self.push(at, Ev::Probe(true));
        }
        true
    }

    fn check_probe(&mut self, d: usize) {
        let Some(p) = self.probe.as_mut() else {
            return;
        };
        let Some(started) = p.started else {
            return;
        };
        let xq = &self.xqs[p.xq];
        if xq.device != d || self.devices[d].is_active(xq.hwq) {
            return;
        }
        p.hist
            .saturating_record(self.now.saturating_sub(started).0.max(1));
        p.started = None;
        p.left = p.left.saturating_sub(1);
        let hold = self.spec.probe.map_or(Nanos::ZERO, |s| s.hold);
        self.push(self.now + hold, Ev::Probe(false));
    }
}

/// Spreads the seeds of workloads' own streams (an odd 64-bit constant: the golden ratio's).
const STREAM_SPACING: u64 = 0x9E37_79B9_7F4A_7C15;

/// Set up and run in one call.
pub fn simulate(spec: SimSpec) -> Result<SimResult, SimError> {
    Ok(Sim::new(spec)?.run())
}

/// The first tick of a `period` clock (phase set by the tick `last` a request started at)
/// that is not before `now`.
fn next_tick(now: Nanos, last: Nanos, period: Nanos) -> Nanos {
    let period = period.0.max(1);
    let behind = now.0.saturating_sub(last.0);
    Nanos(
        behind
            .div_ceil(period)
            .max(1)
            .saturating_mul(period)
            .saturating_add(last.0),
    )
}
