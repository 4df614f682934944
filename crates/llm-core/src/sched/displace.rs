//! Eviction for a higher class ([`Fairness::eviction`](super::Fairness::eviction)): a request
//! above the standard class that cannot be admitted at once does not wait behind sheddable
//! requests that run. The sheddable request admitted last (it has had the least service), or
//! every one, is evicted ([`EvictReason::Displaced`]); the slots, when their drivers report
//! them done, go to the highest class waiting, as every slot does.
//!
//! With a TTFT deadline the waiting request evicts nobody while it has slack: only once its
//! deadline's guard puts it first (`deadline_at`), the moment waiting would miss it. That moment
//! is a timer ([`RequestScheduler::poll_timeout`]), which its driver fires
//! ([`RequestScheduler::handle_timeout`]): the gateway on the clock, the simulator in virtual time.

use super::{Decision, EvictReason, RequestScheduler};
use crate::job::Place;

impl RequestScheduler {
    /// After `id` arrived: if it waits, is above the standard class and eviction is on, evict
    /// for it now, or (with a deadline it can meet) arm its timer.
    pub(super) fn displace_on_arrival(&mut self, id: u64) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        if j.priority <= 0
            || j.place != Place::Waiting
            || self.config.fairness.eviction.victims() == 0
        {
            return;
        }
        match j.deadline_at {
            None => self.displace_for(id),
            Some(at) => {
                let k = self.displace_at.partition_point(|&(t, _)| t <= at);
                self.displace_at.insert(k, (at, id));
            }
        }
    }

    /// `id` no longer waits (admitted, or gone): its timer, if armed, is disarmed.
    pub(super) fn disarm(&mut self, id: u64) {
        if !self.displace_at.is_empty() {
            self.displace_at.retain(|&(_, i)| i != id);
        }
    }

    /// When the scheduler next needs [`handle_timeout`](RequestScheduler::handle_timeout), on the
    /// clock it is fed (`None`: no timer is armed).
    pub fn poll_timeout(&self) -> Option<f64> {
        let displace = self.displace_at.first().map(|&(t, _)| t);
        super::earliest(displace, self.next_readmission())
    }

    /// The clock reached `now`: requests whose deadline's guard has come and that still wait
    /// evict sheddable requests for themselves. Decisions follow as after [`handle`](
    /// RequestScheduler::handle).
    pub fn handle_timeout(&mut self, now: f64) {
        self.clock = self.clock.max(now);
        self.readmit_due(now);
        let due = self.displace_at.partition_point(|&(t, _)| t <= now);
        let due: Vec<u64> = self.displace_at.drain(..due).map(|(_, id)| id).collect();
        for id in due {
            if self
                .jobs
                .get(&id)
                .is_some_and(|j| j.place == Place::Waiting)
            {
                self.displace_for(id);
            }
        }
    }

    /// Evict running sheddable requests for `id`, as many as the eviction rule says, the one
    /// admitted last first.
    fn displace_for(&mut self, _for: u64) {
        let mut victims: Vec<(u64, u64, usize)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.priority < 0)
            .filter(|(_, j)| matches!(j.place, Place::Admitted | Place::Preempted))
            .filter_map(|(&v, j)| Some((j.admitted_seq, v, j.engine?)))
            .collect();
        victims.sort_unstable_by_key(|v| std::cmp::Reverse(v.0));
        victims.truncate(self.config.fairness.eviction.victims());
        for (_, victim, engine) in victims {
            if let Some(j) = self.jobs.get_mut(&victim) {
                j.place = Place::Displaced;
            }
            self.decisions.push_back(Decision::Evict {
                id: victim,
                engine,
                reason: EvictReason::Displaced,
            });
        }
    }
}
