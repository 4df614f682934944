//! Hints: what applications and operators tell the scheduler about a queue.

use crate::error::CoreError;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// The shortest time slice a queue may ask for. Below it a share policy would spend its time
/// switching (and a daemon's timer would fire for every client's whim): refused, not obeyed.
pub const MIN_TIME_SLICE: Nanos = Nanos::from_us(100);

/// One piece of advice about a queue. Policies read the ones they understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hint {
    /// Fixed priority; higher is more urgent.
    Priority(i32),
    /// Bandwidth share weight (e.g. 75 and 25 for a 75:25 split); must be positive.
    Share(u32),
    /// Time-slice length for share policies; at least [`MIN_TIME_SLICE`].
    TimeSlice(Nanos),
    /// Laxity: after becoming ready the queue runs at its own priority for this long, then
    /// becomes critical.
    Laxity(Nanos),
    /// Relative deadline from the moment the queue becomes ready (for deadline policies).
    Deadline(Nanos),
    /// Latency target of one request of this queue (`slo-aware`): a request is a run of the
    /// queue's busy periods separated by short idle gaps, timed from its first command (the
    /// scheduler cannot see work done before it); must be positive.
    Slo(Nanos),
}

/// The hints in force for one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueHints {
    /// Fixed priority; higher is more urgent. Default 0.
    pub priority: i32,
    /// Share weight. Default 1.
    pub share: u32,
    /// Time slice, if set (policies have their own default).
    pub time_slice: Option<Nanos>,
    /// Laxity, if set.
    pub laxity: Option<Nanos>,
    /// Relative deadline, if set.
    pub deadline: Option<Nanos>,
    /// Request latency target, if set (the queues `slo-aware` protects).
    pub slo: Option<Nanos>,
}

impl Default for QueueHints {
    fn default() -> Self {
        QueueHints {
            priority: 0,
            share: 1,
            time_slice: None,
            laxity: None,
            deadline: None,
            slo: None,
        }
    }
}

impl QueueHints {
    /// Apply one hint, rejecting nonsensical values.
    pub fn apply(&mut self, hint: Hint) -> Result<(), CoreError> {
        match hint {
            Hint::Priority(p) => self.priority = p,
            Hint::Share(0) => return Err(CoreError::InvalidHint("share must be positive")),
            Hint::Share(s) => self.share = s,
            Hint::TimeSlice(t) if t < MIN_TIME_SLICE => {
                return Err(CoreError::InvalidHint("time slice must be at least 100 us"));
            }
            Hint::TimeSlice(t) => self.time_slice = Some(t),
            Hint::Laxity(l) => self.laxity = Some(l),
            Hint::Deadline(d) => self.deadline = Some(d),
            Hint::Slo(Nanos::ZERO) => return Err(CoreError::InvalidHint("SLO must be positive")),
            Hint::Slo(t) => self.slo = Some(t),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_hints_are_rejected_and_change_nothing() {
        let mut h = QueueHints::default();
        assert!(h.apply(Hint::Share(0)).is_err());
        assert!(h.apply(Hint::TimeSlice(Nanos::ZERO)).is_err());
        assert!(h.apply(Hint::TimeSlice(Nanos(1))).is_err());
        assert!(h.apply(Hint::TimeSlice(MIN_TIME_SLICE - Nanos(1))).is_err());
        assert!(h.apply(Hint::Slo(Nanos::ZERO)).is_err());
        assert_eq!(h, QueueHints::default());
        h.apply(Hint::Priority(7)).expect("valid");
        h.apply(Hint::Share(75)).expect("valid");
        assert_eq!((h.priority, h.share), (7, 75));
        h.apply(Hint::TimeSlice(MIN_TIME_SLICE))
            .expect("the floor itself is allowed");
        assert_eq!(h.time_slice, Some(MIN_TIME_SLICE));
    }
}
