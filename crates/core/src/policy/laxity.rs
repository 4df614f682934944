//! Laxity: a queue runs at its own priority until its laxity (time since it became ready)
//! expires, then at critical priority above everything. XSched's AI-PC case: speech
//! recognition gets done within its deadline without starving the video stream.

use super::contract::{Policy, PolicyEntry, Scope, serve_lowest_rank};
use crate::ids::DeviceId;
use crate::view::QueueView;
use crate::time::Nanos;
use std::cmp::Reverse;

/// Rank key: critical queues first (earliest expiry first), then by priority.
type LaxityRank = (bool, Nanos, Reverse<i32>);

pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "laxity",
    argument: None,
    build: |_| Ok(Box::new(Laxity::default())),
}];

/// The laxity policy, per device.
#[derive(Debug, Default)]
pub struct Laxity {
    scratch: Vec<(DeviceId, LaxityRank)>,
    next_expiry: Option<Nanos>,
}

fn expiry(q: &QueueView) -> Option<Nanos> {
    q.hints.laxity.map(|l| q.ready_since.saturating_add(l))
}

impl Policy for Laxity {
    fn name(&self) -> &'static str {
        "laxity"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.next_expiry = queues
            .iter()
            .filter(|q| q.ready)
            .filter_map(expiry)
            .filter(|&e| e > now)
            .min();
        serve_lowest_rank(
            queues,
            run,
            Scope::PerDevice,
            &mut self.scratch,
            |q| match expiry(q) {
                Some(e) if q.ready && e <= now => (false, e, Reverse(i32::MAX)),
                _ => (true, Nanos::MAX, Reverse(q.hints.priority)),
            },
        );
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next_expiry
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{decide, view};
    use super::*;

    #[test]
    fn becomes_critical_when_laxity_expires() {
        let mut speech = view(0, 0, 0, true);
        speech.hints.laxity = Some(Nanos::from_ms(100));
        let video = view(1, 0, 5, true);
        let qs = [speech, video];
        let mut p = Laxity::default();
        assert_eq!(decide(&mut p, Nanos::from_ms(50), &qs), vec![false, true]);
        assert_eq!(p.next_timer(), Some(Nanos::from_ms(100)));
        assert_eq!(decide(&mut p, Nanos::from_ms(100), &qs), vec![true, false]);
        assert_eq!(p.next_timer(), None);
    }
}
