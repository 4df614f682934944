//! Launch throttling without preemption: how container-level GPU sharing (vCUDA's fixed
//! quotas, TGS's adaptive rate control) shares a device, as baselines for XSched's harvesting
//! case study (../shared/docs/PAPERS.md §1). Neither system can stop work already on the
//! device; both only hold back an opportunistic job's launches.
//!
//! Per device, the queues at the device's highest registered priority (the production job)
//! always run. Every lower queue (the opportunistic job) may launch only during the first
//! `duty` of each control window of [`WINDOW`]; outside it the queue is suspended, which at
//! Level 1 lets its in-flight commands finish, as held launches do.
//!
//! - `quota:SHARE` (vCUDA-like): `duty` is the fixed SHARE (0 < SHARE <= 1) of every window,
//!   whatever the production job is doing.
//! - `tgs` (TGS-like): `duty` follows the production job's observed throughput by additive
//!   increase, multiplicative decrease. TGS watches a training job's kernel rate; a production
//!   *service* completes requests as fast as they arrive until it is overloaded, so what this
//!   controller watches is how long the production job stays busy per burst of work (a busy
//!   period: from having work to being idle), which stretches when the opportunistic job
//!   slows its kernels. The first [`PROBE_WINDOWS`] windows hold the opportunistic job and
//!   learn the production job's busy period alone; after each later window the duty grows by
//!   [`STEP`] while the window's mean busy period stays within [`TOLERANCE`] of it, and halves
//!   when it does not. A busy period still going on at a window's end counts in that window as
//!   long as it has lasted (so in every window it spans, growing), and again when it ends.

use super::contract::{Policy, PolicyEntry};
use crate::ids::DeviceId;
use crate::view::QueueView;
use crate::time::Nanos;

/// The control window (estimated: neither system publishes one that fits this model).
pub const WINDOW: Nanos = Nanos::from_ms(100);

/// TGS-like: windows that hold the opportunistic job to learn the production job alone.
pub const PROBE_WINDOWS: u32 = 5;

/// TGS-like: additive increase of the duty per window that kept the production job's pace.
pub const STEP: f64 = 0.05;

/// TGS-like: how much longer the production job's mean busy period may be than alone.
pub const TOLERANCE: f64 = 0.10;

/// How the opportunistic share of each window is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DutyRule {
    /// A fixed share (vCUDA-like).
    Fixed(f64),
    /// Additive increase, multiplicative decrease from the production job's pace (TGS-like).
    Adaptive,
}

/// One device's gate.
#[derive(Debug, Clone)]
struct DutyWindow {
    device: DeviceId,
    window_start: Nanos,
    duty: f64,
    /// Adaptive: windows left in the probe, and the production job's busy period alone.
    probes_left: u32,
    alone: Option<f64>,
    probe_sum: f64,
    probe_n: u32,
    /// Busy periods of the production job that ended in this window.
    busy_sum: f64,
    busy_n: u32,
    /// Since when the production job has had work, while it has.
    busy_since: Option<Nanos>,
    /// When the gate next opens or closes (as of the last decision).
    next_change: Nanos,
}

impl DutyWindow {
    fn new(device: DeviceId, now: Nanos, control: DutyRule) -> DutyWindow {
        let (duty, probes_left) = match control {
            DutyRule::Fixed(share) => (share, 0),
            DutyRule::Adaptive => (0.0, PROBE_WINDOWS),
        };
        DutyWindow {
            device,
            window_start: now,
            duty,
            probes_left,
            alone: None,
            probe_sum: 0.0,
            probe_n: 0,
            busy_sum: 0.0,
            busy_n: 0,
            busy_since: None,
            next_change: now,
        }
    }

    /// Whether the opportunistic queues may launch now.
    fn open(&self, now: Nanos) -> bool {
        now < self.window_start + Nanos((WINDOW.0 as f64 * self.duty) as u64)
    }

    /// The next instant the gate changes.
    fn next_change(&self, now: Nanos) -> Nanos {
        let close = self.window_start + Nanos((WINDOW.0 as f64 * self.duty) as u64);
        if now < close {
            close
        } else {
            self.window_start + WINDOW
        }
    }

    /// Follow the production job's busy periods.
    fn observe(&mut self, now: Nanos, busy: Option<Nanos>) {
        match (self.busy_since, busy) {
            (None, Some(since)) => self.busy_since = Some(since),
            (Some(since), None) => {
                self.busy_sum += now.saturating_sub(since).0 as f64;
                self.busy_n += 1;
                self.busy_since = None;
            }
            _ => {}
        }
    }

    /// Close every window that has ended by `now`.
    fn roll(&mut self, now: Nanos, control: DutyRule) {
        if now < self.window_start + WINDOW {
            return;
        }
        if control == DutyRule::Adaptive {
            // A busy period still going on counts as long as it has lasted: a service that
            // never goes idle is the most slowed of all, not unobserved.
            // (One that only began at this instant belongs to the next window.)
            if let Some(since) = self.busy_since.filter(|&since| since < now) {
                self.busy_sum += now.saturating_sub(since).0 as f64;
                self.busy_n += 1;
            }
            self.adapt();
        }
        // Windows in which nothing happened pass without adapting twice.
        let behind = now.saturating_sub(self.window_start).0 / WINDOW.0;
        self.window_start += Nanos(behind * WINDOW.0);
        self.busy_sum = 0.0;
        self.busy_n = 0;
    }

    fn adapt(&mut self) {
        let mean = (self.busy_n > 0).then(|| self.busy_sum / f64::from(self.busy_n));
        if self.probes_left > 0 {
            self.probes_left -= 1;
            if let Some(m) = mean {
                self.probe_sum += m * f64::from(self.busy_n);
                self.probe_n += self.busy_n;
            }
            if self.probes_left == 0 && self.probe_n > 0 {
                self.alone = Some(self.probe_sum / f64::from(self.probe_n));
            } else if self.probes_left == 0 {
                // The production job never ran: nothing to protect yet, keep probing.
                self.probes_left = 1;
            }
            return;
        }
        let kept_pace = match (mean, self.alone) {
            (Some(m), Some(alone)) => m <= alone * (1.0 + TOLERANCE),
            _ => true,
        };
        self.duty = if kept_pace {
            (self.duty + STEP).min(1.0)
        } else {
            self.duty / 2.0
        };
    }
}

/// The launch-throttling baselines of other systems: `quota[:SHARE]` (vCUDA-like fixed quota,
/// default 0.5) and `tgs` (TGS-like adaptive rate).
pub(super) const ENTRIES: &[PolicyEntry] = &[
    PolicyEntry {
        name: "quota",
        argument: Some("SHARE"),
        build: |arg| {
            let share = match arg {
                None => Some(0.5),
                Some(s) => s.parse::<f64>().ok(),
            };
            share
                .and_then(Throttle::quota)
                .map(|t| Box::new(t) as Box<dyn Policy>)
                .ok_or("takes a share with 0 < SHARE <= 1 (`quota:0.2`)")
        },
    },
    PolicyEntry {
        name: "tgs",
        argument: None,
        build: |_| Ok(Box::new(Throttle::tgs())),
    },
];

/// The throttling policy (`quota:SHARE` or `tgs`).
#[derive(Debug)]
pub struct Throttle {
    control: DutyRule,
    gates: Vec<DutyWindow>,
}

impl Throttle {
    /// vCUDA-like: lower-priority queues launch only in the first `share` of every window.
    /// `None` unless `0 < share <= 1`.
    pub fn quota(share: f64) -> Option<Throttle> {
        (share > 0.0 && share <= 1.0).then_some(Throttle {
            control: DutyRule::Fixed(share),
            gates: Vec::new(),
        })
    }

    /// TGS-like: the share adapts to the production job's pace.
    pub fn tgs() -> Throttle {
        Throttle {
            control: DutyRule::Adaptive,
            gates: Vec::new(),
        }
    }

    /// The current opportunistic share of `device`'s windows (for tests and reports).
    pub fn duty(&self, device: DeviceId) -> Option<f64> {
        self.gates
            .iter()
            .find(|g| g.device == device)
            .map(|g| g.duty)
    }
}

/// The highest priority registered on `device`.
fn top_priority(queues: &[QueueView], device: DeviceId) -> i32 {
    queues
        .iter()
        .filter(|q| q.device == device)
        .map(|q| q.hints.priority)
        .max()
        .unwrap_or(i32::MIN)
}

impl Policy for Throttle {
    fn name(&self) -> &'static str {
        match self.control {
            DutyRule::Fixed(_) => "quota",
            DutyRule::Adaptive => "tgs",
        }
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.gates
            .retain(|g| queues.iter().any(|q| q.device == g.device));
        for q in queues {
            if !self.gates.iter().any(|g| g.device == q.device) {
                self.gates
                    .push(DutyWindow::new(q.device, now, self.control));
            }
        }
        for gate in &mut self.gates {
            let top = top_priority(queues, gate.device);
            let busy = queues
                .iter()
                .filter(|q| q.device == gate.device && q.hints.priority == top && q.ready)
                .map(|q| q.ready_since)
                .min();
            gate.observe(now, busy);
            gate.roll(now, self.control);
            let open = gate.open(now);
            gate.next_change = gate.next_change(now);
            for (q, run) in queues.iter().zip(run.iter_mut()) {
                if q.device == gate.device && q.hints.priority < top {
                    *run = open;
                }
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        // The gates change on their own clock; the scheduler calls back at the earliest.
        self.gates.iter().map(|g| g.next_change).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_util::{decide, view};

    fn at(ms: u64) -> Nanos {
        Nanos::from_ms(ms)
    }

    #[test]
    fn quota_opens_the_lower_queues_for_their_share_of_each_window() {
        let mut p = Throttle::quota(0.25).expect("valid share");
        let qs = [view(0, 0, 1, true), view(1, 0, 0, true)];
        assert_eq!(decide(&mut p, at(0), &qs), vec![true, true]);
        assert_eq!(decide(&mut p, at(24), &qs), vec![true, true]);
        assert_eq!(decide(&mut p, at(25), &qs), vec![true, false]);
        assert_eq!(p.next_timer(), Some(at(100)));
        assert_eq!(decide(&mut p, at(99), &qs), vec![true, false]);
        assert_eq!(decide(&mut p, at(100), &qs), vec![true, true]);
        assert_eq!(p.next_timer(), Some(at(125)));
        // Several windows later the phase is kept.
        assert_eq!(decide(&mut p, at(1010), &qs), vec![true, true]);
        assert_eq!(decide(&mut p, at(1030), &qs), vec![true, false]);
    }

    #[test]
    fn quota_refuses_shares_outside_zero_to_one_and_spares_equal_priorities() {
        assert!(Throttle::quota(0.0).is_none());
        assert!(Throttle::quota(1.5).is_none());
        assert!(Throttle::quota(f64::NAN).is_none());
        let mut p = Throttle::quota(0.1).expect("valid share");
        let qs = [
            view(0, 0, 0, true),
            view(1, 0, 0, true),
            view(2, 1, -3, true),
        ];
        // Queue 2 is alone at the top of its device.
        assert_eq!(decide(&mut p, at(50), &qs), vec![true, true, true]);
    }

    /// Drive `p` through `windows` windows in which the production job (queue 0) is busy for
    /// `busy_ms` at the start of each, and return the duty after each.
    fn windows(p: &mut Throttle, from: u64, windows: u64, busy_ms: u64) -> Vec<f64> {
        let mut duties = Vec::new();
        for w in from..from + windows {
            let start = at(100 * w);
            let mut hp = view(0, 0, 1, true);
            hp.ready_since = start;
            decide(p, start, &[hp, view(1, 0, 0, true)]);
            let idle = view(0, 0, 1, false);
            decide(p, start + at(busy_ms), &[idle, view(1, 0, 0, true)]);
            duties.push(p.duty(DeviceId(0)).unwrap_or(f64::NAN));
        }
        duties
    }

    #[test]
    fn tgs_probes_then_grows_while_the_production_pace_holds_and_halves_when_it_slips() {
        let mut p = Throttle::tgs();
        let probe = windows(&mut p, 0, PROBE_WINDOWS as u64 + 1, 10);
        assert!(
            probe.iter().all(|d| *d == 0.0),
            "held while probing: {probe:?}"
        );
        let grow = windows(&mut p, PROBE_WINDOWS as u64 + 1, 4, 10);
        let expect = [0.05, 0.10, 0.15, 0.20];
        for (d, e) in grow.iter().zip(expect) {
            assert!((d - e).abs() < 1e-9, "{grow:?}");
        }
        // Busy periods 50 % longer than alone: the share halves.
        let slip = windows(&mut p, PROBE_WINDOWS as u64 + 5, 2, 15);
        assert!((slip[1] - 0.125).abs() < 1e-9, "{slip:?}");
    }

    #[test]
    fn tgs_counts_a_busy_period_that_never_ends() {
        let mut p = Throttle::tgs();
        windows(&mut p, 0, PROBE_WINDOWS as u64 + 3, 10);
        let before = p.duty(DeviceId(0)).unwrap_or(f64::NAN);
        assert!(before > 0.0);
        // The service turns busy and stays busy through the next two windows.
        let start = at(100 * (PROBE_WINDOWS as u64 + 3));
        let mut hp = view(0, 0, 1, true);
        hp.ready_since = start;
        for t in [start, start + at(100), start + at(200)] {
            decide(&mut p, t, &[hp, view(1, 0, 0, true)]);
        }
        let after = p.duty(DeviceId(0)).unwrap_or(f64::NAN);
        assert!(after < before / 2.0 + 1e-9, "{before} -> {after}");
    }

    #[test]
    fn tgs_holds_the_opportunistic_job_while_probing() {
        let mut p = Throttle::tgs();
        let qs = [view(0, 0, 1, false), view(1, 0, 0, true)];
        assert_eq!(decide(&mut p, at(1), &qs), vec![true, false]);
        assert_eq!(p.name(), "tgs");
    }
}
