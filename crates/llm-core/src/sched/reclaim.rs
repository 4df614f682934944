//! An engine that stops answering ([`Input::Responsive`](super::Input::Responsive)): it is sent
//! nothing, and the requests there whose answer has not begun are taken back
//! ([`EvictReason::Unresponsive`]). Nothing of theirs reached a client, so placing them on an
//! engine that answers sends nothing twice; a hung engine then costs them the time to notice
//! it, not the driver's first-byte timeout. With no engine answering, they and every request
//! waiting are shed (their clients told to retry), and so is each arrival until one answers.
//! What has begun answering is left to finish or fail there.

use super::{Decision, EvictReason, InputError, Placement, RequestScheduler, ShedReason};
use crate::job::Place;

impl RequestScheduler {
    /// `engine` answers again, or stopped answering.
    pub(super) fn responsive(
        &mut self,
        now: f64,
        engine: usize,
        responsive: bool,
    ) -> Result<(), InputError> {
        self.engine_mut(engine)?.responsive = responsive;
        if responsive {
            self.decide(now, Some(engine));
            return Ok(());
        }
        let taken: Vec<u64> = self.engines[engine]
            .admitted
            .iter()
            .copied()
            .filter(|id| {
                self.jobs.get(id).is_some_and(|j| {
                    matches!(j.place, Place::Admitted | Place::Preempted)
                        && j.generated == 0
                        && !j.answering
                })
            })
            .collect();
        for &id in &taken {
            self.take_back(id, engine);
        }
        if self.engines.iter().any(|e| e.responsive) {
            self.decide(now, None);
        } else {
            self.shed_waiting();
        }
        Ok(())
    }

    /// No engine answers: every request waiting is shed (its client told to retry) rather than
    /// held for an engine that may never answer.
    fn shed_waiting(&mut self) {
        let waiting: Vec<u64> = (self.jobs.iter())
            .filter(|(_, j)| j.place == Place::Waiting)
            .map(|(&id, _)| id)
            .collect();
        for id in waiting {
            self.forget(id);
            let reason = ShedReason::NoEngine;
            self.decisions.push_back(Decision::Shed { id, reason });
        }
    }

    /// Whether no engine answers ([`Input::Responsive`](super::Input::Responsive)): every
    /// arrival is shed then.
    pub fn none_responsive(&self) -> bool {
        !self.engines.iter().any(|e| e.responsive)
    }

    /// Take request `id` back from `engine`: it waits again, unrouted, at its rank.
    fn take_back(&mut self, id: u64, engine: usize) {
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        let e = &mut self.engines[engine];
        e.admitted.retain(|&a| a != id);
        e.cost = (e.cost - job.routed_cost).max(0.0);
        // Its prompt is charged again when it is admitted again.
        self.counters.correct(job.tenant, -f64::from(job.input));
        job.place = Place::Waiting;
        job.engine = None;
        if self.config.placement == Placement::AtArrival {
            self.route_on_arrival(&mut job);
        }
        self.jobs.insert(id, job);
        self.enqueue(id);
        self.decisions.push_back(Decision::Evict {
            id,
            engine,
            reason: EvictReason::Unresponsive,
        });
    }
}
