//! Eviction for a higher class ([`Fairness::eviction`](super::Fairness::eviction)): a request
//! above the standard class that cannot be admitted at once does not wait behind sheddable
//! requests that run. The sheddable request admitted last (it has had the least service), or
//! every one, is evicted ([`EvictReason::Displaced`](super::EvictReason::Displaced)); the
//! slots, when their drivers report them done, go to the highest class waiting, as every slot
//! does.
//!
//! With a TTFT deadline the waiting request evicts nobody while it has slack: only once its
//! deadline's guard puts it first (`deadline_at`), the moment waiting would miss it. That moment
//! is a timer ([`RequestScheduler::poll_timeout`](super::RequestScheduler::poll_timeout)), which
//! its driver fires: the gateway on the clock, the simulator in virtual time. This part keeps
//! the timers and picks the victims; the round evicts them.

use crate::job::{Job, Place};
use std::collections::BTreeMap;

/// The armed timers: waiting requests above the standard class that evict sheddable ones at a
/// time (their TTFT deadline's guard), earliest first.
#[derive(Debug, Default)]
pub(super) struct Displacer {
    at: Vec<(f64, u64)>,
}

impl Displacer {
    /// Arm `id`'s timer for `at`.
    pub(super) fn arm(&mut self, at: f64, id: u64) {
        let k = self.at.partition_point(|&(t, _)| t <= at);
        self.at.insert(k, (at, id));
    }

    /// `id` no longer waits (admitted, or gone): its timer, if armed, is disarmed.
    pub(super) fn disarm(&mut self, id: u64) {
        if !self.at.is_empty() {
            self.at.retain(|&(_, i)| i != id);
        }
    }

    /// When the first timer is due.
    pub(super) fn next(&self) -> Option<f64> {
        self.at.first().map(|&(t, _)| t)
    }

    /// The requests whose timers are due at `now`, disarmed, earliest first.
    pub(super) fn due(&mut self, now: f64) -> Vec<u64> {
        let due = self.at.partition_point(|&(t, _)| t <= now);
        self.at.drain(..due).map(|(_, id)| id).collect()
    }
}

/// The running sheddable requests of `jobs` to evict for one above the standard class, at most
/// `most`, the one admitted last first: each with its engine.
pub(super) fn victims(jobs: &BTreeMap<u64, Job>, most: usize) -> Vec<(u64, usize)> {
    let mut victims: Vec<(u64, u64, usize)> = jobs
        .iter()
        .filter(|(_, j)| j.priority < 0)
        .filter(|(_, j)| matches!(j.place, Place::Admitted | Place::Preempted))
        .filter_map(|(&v, j)| Some((j.admitted_seq, v, j.engine?)))
        .collect();
    victims.sort_unstable_by_key(|v| std::cmp::Reverse(v.0));
    victims.truncate(most);
    victims.into_iter().map(|(_, v, e)| (v, e)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_time_order_once_and_a_disarmed_one_never() {
        let mut d = Displacer::default();
        d.arm(3.0, 30);
        d.arm(1.0, 10);
        d.arm(2.0, 20);
        d.disarm(20);
        assert_eq!(d.next(), Some(1.0));
        assert_eq!(d.due(0.5), Vec::<u64>::new());
        assert_eq!(d.due(3.0), [10, 30]);
        assert_eq!(d.next(), None);
    }
}
