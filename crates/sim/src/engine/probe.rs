//! The preemption probe: it suspends a queue at random moments and measures how long until its
//! device has stopped running it, then resumes it after a hold.

use super::{Ev, ProbeState, ScenarioError, Sim};
use xsched_core::Nanos;
use xsched_report::new_histogram;

impl Sim {
    /// Set up the spec's preemption probe, if any, and schedule its first request.
    pub(super) fn add_probe(&mut self) -> Result<(), ScenarioError> {
        if let Some(p) = self.spec.probe {
            if p.queue >= self.xqs.len() {
                return Err(ScenarioError::Spec(format!(
                    "probe names queue {}",
                    p.queue
                )));
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

    /// Returns false when the probe has all its measurements.
    pub(super) fn probe_step(&mut self, suspend: bool) -> bool {
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

    pub(super) fn check_probe(&mut self, d: usize) {
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
