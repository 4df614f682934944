//! Where requests wait and what the engines hold: the queue a request waits in (the one queue,
//! or its engine's when placed on arrival), putting it there at its rank and taking it out,
//! whether an engine has a slot free, and the loads the router weighs.

use super::{Engine, Placement, RequestScheduler};
use crate::job::{Job, Place};
use crate::lanes::Lanes;
use crate::order;
use crate::route::EngineLoad;

impl RequestScheduler {
    /// Whether running request `j` keeps sheddable requests off its engine
    /// ([`Fairness::sheddable_apart`], [`Fairness::sheddable_after_first_token`]).
    pub(super) fn keeps_sheddables_off(&self, j: &Job) -> bool {
        let fairness = &self.config.fairness;
        let prefilling = j.generated == 0 && fairness.sheddable_after_first_token;
        if j.priority > 0 {
            fairness.sheddable_apart || prefilling
        } else {
            j.priority < 0
                && j.reports_first_token
                && prefilling
                && self.clock <= self.high_class_until
        }
    }

    /// Whether `engine` (or, with `None`, any engine) is up with a slot free.
    pub(super) fn slot_free(&self, engine: Option<usize>) -> bool {
        let free = |e: &Engine| e.serves() && e.admitted.len() < e.concurrency();
        match engine {
            Some(e) => self.engines.get(e).is_some_and(free),
            None => self.engines.iter().any(free),
        }
    }

    /// The lanes a request routed to `engine` waits in.
    pub(super) fn lanes_of(&self, engine: Option<usize>) -> &Lanes {
        match (self.config.placement, engine) {
            (Placement::AtArrival, Some(e)) => &self.engines[e].queue,
            _ => &self.queue,
        }
    }

    /// The queue `id` waits in.
    pub(super) fn queue_of(&mut self, id: u64) -> Option<&mut Lanes> {
        let engine = self.jobs.get(&id)?.engine;
        Some(match (self.config.placement, engine) {
            (Placement::AtArrival, Some(e)) => &mut self.engines[e].queue,
            _ => &mut self.queue,
        })
    }

    /// Put waiting `id` in its queue at its current rank.
    pub(super) fn enqueue(&mut self, id: u64) {
        self.enqueue_as(id, true);
    }

    /// Put waiting `id` in its queue at its current rank, its tenant lifted if it is new
    /// (`arriving`), or not (put back after being set aside).
    pub(super) fn enqueue_as(&mut self, id: u64, arriving: bool) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        let rank = order::rank(
            self.config.policy.order,
            j,
            &self.service,
            self.config.policy.preemptive,
        );
        let (seq, aged_at, class, tenant) = (j.seq, j.aged_at, j.priority, j.tenant);
        let lanes = match (self.config.placement, j.engine) {
            (Placement::AtArrival, Some(e)) => &mut self.engines[e].queue,
            _ => &mut self.queue,
        };
        if arriving {
            lanes.push(id, class, tenant, rank, seq, aged_at, &mut self.counters);
        } else {
            lanes.put_back(id, class, tenant, rank, seq, aged_at);
        }
    }

    /// Drop `id` from wherever it is.
    pub(super) fn forget(&mut self, id: u64) {
        self.disarm(id);
        if let Some(q) = self.queue_of(id) {
            q.remove(id);
        }
        let Some(j) = self.jobs.remove(&id) else {
            return;
        };
        let routed = self.config.placement == Placement::AtArrival;
        let Some(e) = j.engine.and_then(|e| self.engines.get_mut(e)) else {
            return;
        };
        if j.place != Place::Waiting || routed {
            e.cost = (e.cost - j.routed_cost).max(0.0);
        }
        if j.place != Place::Waiting {
            e.admitted.retain(|&a| a != id);
            e.headroom.completed(e.pressed);
            e.pressed = false;
        }
    }

    /// What the router sees of each engine, for a request of `prefix`.
    pub(super) fn loads(&self, prefix: &[u64]) -> Vec<EngineLoad> {
        let prefixed = self.config.router.needs_prefix() && !prefix.is_empty();
        self.engines
            .iter()
            .map(|e| EngineLoad {
                // Routed here on arrival and still waiting counts too.
                outstanding: e.admitted.len() + e.queue.len(),
                waiting: e.report.waiting + e.queue.len(),
                kv_used: match (e.report.kv_free_tokens, e.limits.kv_tokens) {
                    (Some(free), Some(cap)) if cap > 0 => 1.0 - free as f64 / cap as f64,
                    _ => 0.0,
                },
                cost: e.cost,
                uncached_blocks: if prefixed {
                    prefix.len() - e.prefixes.matched(prefix) + 1
                } else {
                    0
                },
            })
            .collect()
    }
}
