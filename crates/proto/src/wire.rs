//! The hints as they travel: the protocol's own types, so that a change in the core's structs
//! cannot change the wire format unnoticed (the golden-bytes test pins these), and a daemon
//! validates what a client sends instead of trusting it.

use crate::codec::ProtoError;
use serde::{Deserialize, Serialize};
use xsched_core::{Hint, Nanos, QueueHints};

/// One piece of advice about a queue (the core's [`Hint`], durations in nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireHint {
    /// Fixed priority; higher is more urgent.
    Priority(i32),
    /// Share weight.
    Share(u32),
    /// Time slice.
    TimeSliceNs(u64),
    /// Laxity.
    LaxityNs(u64),
    /// Relative deadline from becoming ready.
    DeadlineNs(u64),
    /// Request latency target.
    SloNs(u64),
}

impl From<Hint> for WireHint {
    fn from(h: Hint) -> WireHint {
        match h {
            Hint::Priority(p) => WireHint::Priority(p),
            Hint::Share(s) => WireHint::Share(s),
            Hint::TimeSlice(t) => WireHint::TimeSliceNs(t.0),
            Hint::Laxity(l) => WireHint::LaxityNs(l.0),
            Hint::Deadline(d) => WireHint::DeadlineNs(d.0),
            Hint::Slo(s) => WireHint::SloNs(s.0),
        }
    }
}

impl From<WireHint> for Hint {
    fn from(h: WireHint) -> Hint {
        match h {
            WireHint::Priority(p) => Hint::Priority(p),
            WireHint::Share(s) => Hint::Share(s),
            WireHint::TimeSliceNs(t) => Hint::TimeSlice(Nanos(t)),
            WireHint::LaxityNs(l) => Hint::Laxity(Nanos(l)),
            WireHint::DeadlineNs(d) => Hint::Deadline(Nanos(d)),
            WireHint::SloNs(s) => Hint::Slo(Nanos(s)),
        }
    }
}

/// The hints in force for one queue, as they travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireHints {
    /// Fixed priority.
    pub priority: i32,
    /// Share weight (0 on the wire means the default, 1).
    pub share: u32,
    /// Time slice, if set.
    pub time_slice_ns: Option<u64>,
    /// Laxity, if set.
    pub laxity_ns: Option<u64>,
    /// Relative deadline, if set.
    pub deadline_ns: Option<u64>,
    /// Request latency target, if set.
    pub slo_ns: Option<u64>,
}

impl From<QueueHints> for WireHints {
    fn from(h: QueueHints) -> WireHints {
        WireHints {
            priority: h.priority,
            share: h.share,
            time_slice_ns: h.time_slice.map(|t| t.0),
            laxity_ns: h.laxity.map(|l| l.0),
            deadline_ns: h.deadline.map(|d| d.0),
            slo_ns: h.slo.map(|s| s.0),
        }
    }
}

impl WireHints {
    /// The core's hints, each value checked as if it had been given as a hint (a zero slice or
    /// SLO is an error, never a silent adjustment).
    pub fn to_core(self) -> Result<QueueHints, ProtoError> {
        let mut h = QueueHints::default();
        let mut set = |hint: WireHint| h.apply(hint.into());
        set(WireHint::Priority(self.priority))?;
        if self.share != 0 {
            set(WireHint::Share(self.share))?;
        }
        for (value, make) in [
            (
                self.time_slice_ns,
                WireHint::TimeSliceNs as fn(u64) -> WireHint,
            ),
            (self.laxity_ns, WireHint::LaxityNs),
            (self.deadline_ns, WireHint::DeadlineNs),
            (self.slo_ns, WireHint::SloNs),
        ] {
            if let Some(v) = value {
                set(make(v))?;
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_cross_the_wire_unchanged_and_bad_ones_are_refused() {
        let mut h = QueueHints::default();
        for hint in [
            Hint::Priority(-3),
            Hint::Share(7),
            Hint::TimeSlice(Nanos::from_us(150)),
            Hint::Laxity(Nanos(6)),
            Hint::Deadline(Nanos(8)),
            Hint::Slo(Nanos(9)),
        ] {
            h.apply(hint).expect("valid");
            assert_eq!(Hint::from(WireHint::from(hint)), hint);
        }
        assert_eq!(WireHints::from(h).to_core().ok(), Some(h));
        let zero_slice = WireHints {
            time_slice_ns: Some(0),
            ..WireHints::default()
        };
        assert!(zero_slice.to_core().is_err());
        assert_eq!(
            WireHints::default().to_core().ok(),
            Some(QueueHints::default())
        );
    }
}
