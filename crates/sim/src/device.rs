//! A simulated device: hardware queues and the device's *native* arbitration between them.
//!
//! Three native behaviours cover the ten XPUs of the XSched paper: one FIFO across processes
//! (non-preemptive, in launch order), round-robin time slices between processes with a
//! context-switch cost (GPU time-slice groups), and concurrent execution where several queues
//! progress at once with a total speed-up factor (two processes on an MI50 run 1.14x as fast
//! as one). On top, per-queue hardware controls implement preemption Levels 2 (deactivate:
//! the queue's not-yet-started commands are held) and 3 (interrupt: the running one stops too).
//!
//! The model is processor sharing with exact event times: `step(now)` advances every running
//! command to `now`, collects completions, re-dispatches, and returns the next time anything
//! changes on its own.

use serde::Deserialize;
use std::collections::VecDeque;
use xsched_core::{CommandId, Nanos};

/// How the hardware shares itself between queues without xsched. Profile files write it as
/// `{ kind = "timeslice", slice = 1_000_000, switch = 25_000 }` (durations in nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Arbitration {
    /// One command at a time, in launch order across all queues; runs to completion.
    Fifo,
    /// Round-robin between queues with work, `slice` each; switching costs `switch` idle time.
    TimeSlice {
        /// Slice length.
        slice: Nanos,
        /// Context-switch cost.
        switch: Nanos,
    },
    /// Every queue's head runs at once; together they go `speedup` times as fast as one.
    Concurrent {
        /// Total throughput of two or more queues relative to one.
        speedup: f64,
    },
}

impl Arbitration {
    /// A short name for tables.
    pub fn label(&self) -> String {
        match self {
            Arbitration::Fifo => "fifo".into(),
            Arbitration::TimeSlice { slice, .. } => format!("timeslice {slice}"),
            Arbitration::Concurrent { speedup } => format!("concurrent x{speedup:.2}"),
        }
    }
}

/// A command in a hardware queue.
#[derive(Debug, Clone, Copy)]
pub struct HwCmd {
    /// The XQueue (simulator index) it came from.
    pub xq: u32,
    /// Its id within that XQueue.
    pub cmd: CommandId,
    /// Standalone execution time.
    pub work: Nanos,
    /// Whether the launcher waits on it.
    pub sync: bool,
    /// Whether a Level-3 interrupt may restart it from scratch.
    pub idempotent: bool,
    seq: u64,
    remaining: f64,
}

impl HwCmd {
    /// A command ready to enter a hardware queue.
    pub fn new(xq: u32, cmd: CommandId, work: Nanos, sync: bool, idempotent: bool) -> HwCmd {
        HwCmd {
            xq,
            cmd,
            work,
            sync,
            idempotent,
            seq: 0,
            remaining: work.0 as f64,
        }
    }
}

#[derive(Debug, Default)]
struct HwQueue {
    cmds: VecDeque<HwCmd>,
    deactivated: bool,
    interrupted: bool,
    head_started: bool,
}

impl HwQueue {
    fn eligible(&self) -> bool {
        !self.interrupted && !self.cmds.is_empty() && (!self.deactivated || self.head_started)
    }
}

/// One simulated device.
#[derive(Debug)]
pub struct Device {
    arbitration: Arbitration,
    keeps_state: bool,
    queues: Vec<HwQueue>,
    running: Vec<usize>,
    rate: f64,
    last: Nanos,
    seq: u64,
    owner: Option<usize>,
    slice_end: Nanos,
    switch_until: Nanos,
    busy: Nanos,
}

impl Device {
    /// A device with the given native arbitration. `keeps_state`: a Level-3 interrupt keeps
    /// the running command's progress (else idempotent commands restart).
    pub fn new(arbitration: Arbitration, keeps_state: bool) -> Device {
        Device {
            arbitration,
            keeps_state,
            queues: Vec::new(),
            running: Vec::new(),
            rate: 1.0,
            last: Nanos::ZERO,
            seq: 0,
            owner: None,
            slice_end: Nanos::ZERO,
            switch_until: Nanos::ZERO,
            busy: Nanos::ZERO,
        }
    }

    /// Add a hardware queue; returns its index.
    pub fn add_queue(&mut self) -> usize {
        self.queues.push(HwQueue::default());
        self.queues.len() - 1
    }

    /// Put a launched command at the tail of hardware queue `hwq`. Call [`step`](Self::step) next.
    pub fn push(&mut self, hwq: usize, mut cmd: HwCmd) {
        self.seq += 1;
        cmd.seq = self.seq;
        self.queues[hwq].cmds.push_back(cmd);
    }

    /// Level 2: hold (or release) `hwq`'s commands that have not started. Call `step` next.
    pub fn set_deactivated(&mut self, now: Nanos, hwq: usize, on: bool) {
        self.advance(now);
        self.queues[hwq].deactivated = on;
    }

    /// Level 3: stop (or let continue) `hwq`'s running command. Call `step` next.
    pub fn set_interrupted(&mut self, now: Nanos, hwq: usize, on: bool) {
        self.advance(now);
        let keeps_state = self.keeps_state;
        let q = &mut self.queues[hwq];
        q.interrupted = on;
        let restart = on && q.head_started && !keeps_state;
        if let Some(head) = q.cmds.front_mut().filter(|h| restart && h.idempotent) {
            head.remaining = head.work.0 as f64;
            q.head_started = false;
        }
    }

    /// Whether `hwq` still occupies the device: it has a running command or commands the device
    /// may start. A suspended queue whose preemption completed is inactive.
    pub fn is_active(&self, hwq: usize) -> bool {
        self.queues[hwq].eligible()
    }

    /// Time during which at least one command ran.
    pub fn busy(&self) -> Nanos {
        self.busy
    }

    fn advance(&mut self, now: Nanos) {
        if now <= self.last {
            return;
        }
        let dt = (now - self.last).0 as f64;
        if !self.running.is_empty() {
            self.busy += now - self.last;
            for &q in &self.running {
                if let Some(head) = self.queues[q].cmds.front_mut() {
                    head.remaining -= dt * self.rate;
                }
            }
        }
        self.last = now;
    }

    /// Advance to `now`, move finished commands into `done`, re-dispatch, and return the next
    /// time the device changes on its own (a completion, a slice end, a switch end).
    pub fn step(&mut self, now: Nanos, done: &mut Vec<HwCmd>) -> Option<Nanos> {
        self.advance(now);
        for &q in &self.running {
            let hq = &mut self.queues[q];
            if hq.cmds.front().is_some_and(|h| h.remaining < 0.5) {
                if let Some(c) = hq.cmds.pop_front() {
                    done.push(c);
                }
                hq.head_started = false;
            }
        }
        self.dispatch(now)
    }

    fn dispatch(&mut self, now: Nanos) -> Option<Nanos> {
        self.running.clear();
        let mut wake = None;
        match self.arbitration {
            Arbitration::Fifo => {
                // Non-preemptive: a started head that is still eligible keeps the device.
                let started = (0..self.queues.len())
                    .find(|&i| self.queues[i].head_started && self.queues[i].eligible());
                let pick = started.or_else(|| {
                    (0..self.queues.len())
                        .filter(|&i| self.queues[i].eligible())
                        .min_by_key(|&i| self.queues[i].cmds.front().map_or(u64::MAX, |c| c.seq))
                });
                if let Some(i) = pick {
                    self.running.push(i);
                }
                self.rate = 1.0;
            }
            Arbitration::TimeSlice { slice, switch } => {
                wake = self.dispatch_timeslice(now, slice, switch);
                self.rate = 1.0;
            }
            Arbitration::Concurrent { speedup } => {
                self.running
                    .extend((0..self.queues.len()).filter(|&i| self.queues[i].eligible()));
                self.rate = if self.running.len() > 1 {
                    speedup / self.running.len() as f64
                } else {
                    1.0
                };
            }
        }
        let mut next = wake;
        for &q in &self.running {
            let hq = &mut self.queues[q];
            hq.head_started = true;
            if let Some(head) = hq.cmds.front() {
                let t = now + Nanos((head.remaining.max(0.0) / self.rate).ceil() as u64);
                next = Some(next.map_or(t, |n: Nanos| n.min(t)));
            }
        }
        next
    }

    fn dispatch_timeslice(&mut self, now: Nanos, slice: Nanos, switch: Nanos) -> Option<Nanos> {
        if now < self.switch_until {
            return Some(self.switch_until);
        }
        let n = self.queues.len();
        let others_waiting =
            |owner: usize, qs: &[HwQueue]| (0..n).any(|i| i != owner && qs[i].eligible());
        if let Some(o) = self.owner.filter(|&o| self.queues[o].eligible()) {
            let contended = others_waiting(o, &self.queues);
            if now < self.slice_end || !contended {
                if now >= self.slice_end {
                    self.slice_end = now + slice;
                }
                self.running.push(o);
                return contended.then_some(self.slice_end);
            }
        }
        let start = self.owner.map_or(0, |o| o + 1);
        let p = (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| self.queues[i].eligible())?;
        if self.owner.is_some_and(|o| o != p) {
            self.owner = Some(p);
            self.switch_until = now + switch;
            self.slice_end = self.switch_until + slice;
            return Some(self.switch_until);
        }
        self.owner = Some(p);
        self.slice_end = now + slice;
        self.running.push(p);
        others_waiting(p, &self.queues).then_some(self.slice_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(xq: u32, id: u64, us: u64) -> HwCmd {
        HwCmd::new(xq, CommandId(id), Nanos::from_us(us), false, false)
    }

    /// Step the device until idle; return (xq, cmd, completion time) in order.
    fn run(dev: &mut Device, from: Nanos) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        let mut done = Vec::new();
        let mut now = from;
        while let Some(t) = dev.step(now, &mut done) {
            for c in done.drain(..) {
                out.push((c.xq, c.cmd.0, now.0 / 1000));
            }
            now = t;
        }
        for c in done.drain(..) {
            out.push((c.xq, c.cmd.0, now.0 / 1000));
        }
        out
    }

    #[test]
    fn fifo_runs_in_launch_order() {
        let mut d = Device::new(Arbitration::Fifo, true);
        let a = d.add_queue();
        let b = d.add_queue();
        d.push(a, cmd(0, 0, 10));
        d.push(b, cmd(1, 0, 10));
        d.push(a, cmd(0, 1, 10));
        assert_eq!(
            run(&mut d, Nanos::ZERO),
            vec![(0, 0, 10), (1, 0, 20), (0, 1, 30)]
        );
        assert_eq!(d.busy(), Nanos::from_us(30));
    }

    #[test]
    fn timeslice_alternates_with_switch_cost() {
        let slice = Nanos::from_us(100);
        let mut d = Device::new(
            Arbitration::TimeSlice {
                slice,
                switch: Nanos::from_us(10),
            },
            true,
        );
        let a = d.add_queue();
        let b = d.add_queue();
        d.push(a, cmd(0, 0, 150));
        d.push(b, cmd(1, 0, 150));
        // a: 0-100, switch, b: 110-210, switch, a: 220-270 done, switch, b: 280-330 done.
        assert_eq!(run(&mut d, Nanos::ZERO), vec![(0, 0, 270), (1, 0, 330)]);
    }

    #[test]
    fn concurrent_shares_with_speedup() {
        let mut d = Device::new(Arbitration::Concurrent { speedup: 1.2 }, true);
        let a = d.add_queue();
        let b = d.add_queue();
        d.push(a, cmd(0, 0, 60));
        d.push(b, cmd(1, 0, 60));
        // Each at 0.6: both finish at 100 us.
        assert_eq!(run(&mut d, Nanos::ZERO), vec![(0, 0, 100), (1, 0, 100)]);
    }

    #[test]
    fn deactivate_holds_queued_but_finishes_running() {
        let mut d = Device::new(Arbitration::Fifo, true);
        let a = d.add_queue();
        d.push(a, cmd(0, 0, 100));
        d.push(a, cmd(0, 1, 100));
        let mut done = Vec::new();
        d.step(Nanos::ZERO, &mut done);
        d.set_deactivated(Nanos::from_us(50), a, true);
        assert!(d.is_active(a), "running head still occupies the device");
        assert_eq!(
            d.step(Nanos::from_us(50), &mut done),
            Some(Nanos::from_us(100))
        );
        assert_eq!(d.step(Nanos::from_us(100), &mut done), None);
        assert_eq!(done.len(), 1);
        assert!(!d.is_active(a));
        d.set_deactivated(Nanos::from_us(300), a, false);
        assert_eq!(
            d.step(Nanos::from_us(300), &mut done),
            Some(Nanos::from_us(400))
        );
    }

    #[test]
    fn interrupt_keeps_progress_or_restarts_idempotent() {
        for (keeps, idempotent, expect_end) in
            [(true, false, 150), (false, true, 200), (false, false, 150)]
        {
            let mut d = Device::new(Arbitration::Fifo, keeps);
            let a = d.add_queue();
            d.push(
                a,
                HwCmd::new(0, CommandId(0), Nanos::from_us(100), false, idempotent),
            );
            let mut done = Vec::new();
            d.step(Nanos::ZERO, &mut done);
            d.set_interrupted(Nanos::from_us(50), a, true);
            assert!(!d.is_active(a));
            assert_eq!(d.step(Nanos::from_us(50), &mut done), None);
            d.set_interrupted(Nanos::from_us(100), a, false);
            assert_eq!(
                d.step(Nanos::from_us(100), &mut done),
                Some(Nanos::from_us(expect_end))
            );
        }
    }
}
