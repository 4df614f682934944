//! The decision round: after an input that can change who may run, admit what fits, in the
//! policy's order, to the engine the router prefers, and, under a preemptive policy, pause
//! worse-ranked running requests where that makes the head fit. It never skips the head (vLLM's
//! rule), except a head limited to some engines, set aside for the round.

use super::{Decision, EvictReason, Placement, RequestScheduler, earliest};
use crate::admit::{Occupant, expected_peak};
use crate::job::Place;
use crate::order::{self, Rank};
use crate::policy::KvAdmission;

impl RequestScheduler {
    /// Admit what fits, in order, pausing where a preemptive policy gains by it. What happened
    /// concerns `engine` (a completion there, its report), or, with `None`, the queue (an
    /// arrival): only that engine's room, or its queue placed on arrival, can have changed, so
    /// only that engine is asked; an arrival asks every engine, in the router's order.
    pub(super) fn decide(&mut self, now: f64, engine: Option<usize>) {
        match self.config.placement {
            Placement::WhenFree => {
                self.queue.promote(now);
                // A head limited to some engines (a proxy's subset) that fit it not holds back
                // no one who may go elsewhere: it is set aside for the round, keeping its place.
                let mut aside = Vec::new();
                loop {
                    if self.serve_shared(now, engine) {
                        continue;
                    }
                    match self.queue.first(&self.counters) {
                        Some(id) if self.jobs.get(&id).is_some_and(|j| !j.engines.is_empty()) => {
                            self.queue.remove(id);
                            aside.push(id);
                        }
                        _ => break,
                    }
                }
                for id in aside {
                    self.enqueue_as(id, false);
                }
            }
            Placement::AtArrival => {
                if let Some(e) = engine.filter(|&e| e < self.engines.len()) {
                    self.engines[e].queue.promote(now);
                    while self.serve_engine(now, e) {}
                }
            }
        }
    }

    /// Admit the shared queue's head on `only` or, with `None`, anywhere; whether it was.
    pub(super) fn serve_shared(&mut self, now: f64, only: Option<usize>) -> bool {
        let Some(id) = self.queue.first(&self.counters) else {
            return false;
        };
        let pinned = self.jobs.get(&id).and_then(|j| j.engine);
        let eligible: Vec<usize> = match (pinned, only) {
            (Some(p), Some(o)) if p != o => return false,
            (Some(e), _) | (None, Some(e)) => vec![e],
            (None, None) => (0..self.engines.len()).collect(),
        };
        let eligible = match self.jobs.get(&id) {
            Some(j) => j.allowed(eligible),
            None => eligible,
        };
        // The router's favourite that has room (asking engines in its order of preference).
        let prefix = self.jobs.get(&id).map_or(&[][..], |j| &j.prefix);
        let order = self
            .config
            .router
            .preference(&eligible, &self.loads(prefix), self.turn);
        if let Some(e) = order.into_iter().find(|&e| self.fits(e, id, &[])) {
            self.turn = e + 1;
            self.admit(now, id, e);
            return true;
        }
        eligible.into_iter().any(|e| self.evict_for(now, id, e))
    }

    /// Admit engine `e`'s own queue head; whether it was.
    pub(super) fn serve_engine(&mut self, now: f64, e: usize) -> bool {
        let Some(id) = self.engines[e].queue.first(&self.counters) else {
            return false;
        };
        if self.fits(e, id, &[]) {
            self.admit(now, id, e);
            return true;
        }
        self.evict_for(now, id, e)
    }

    /// Whether request `id` fits engine `e` were `paused` (running there) not.
    pub(super) fn fits(&mut self, e: usize, id: u64, paused: &[u64]) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        let engine = &self.engines[e];
        if !engine.serves() {
            return false;
        }
        if engine.orders {
            // The engine orders and batches; only what it holds is bounded.
            let holds = self.config.engine_order.map_or(usize::MAX, |o| o.holds);
            return engine.admitted.len() - paused.len() < holds;
        }
        if job.priority < 0
            && engine.admitted.iter().any(|a| {
                self.jobs
                    .get(a)
                    .is_some_and(|j| self.keeps_sheddables_off(j))
            })
        {
            return false;
        }
        let block = u64::from(engine.limits.block_tokens);
        let freed: u64 = paused
            .iter()
            .filter_map(|p| self.jobs.get(p))
            .map(|p| u64::from(p.context()).div_ceil(block) * block)
            .sum();
        if engine.admitted.len() - paused.len() >= engine.concurrency() {
            return false;
        }
        let step = engine
            .report
            .step_tokens
            .map(|t| t.saturating_add(paused.len() as u32));
        if step == Some(0) {
            return false;
        }
        let chunk = u64::from(step.map_or(job.context(), |t| t.min(job.context())));
        if let Some(free) = engine.report.kv_free_tokens
            && free + freed < chunk.div_ceil(block) * block
        {
            return false;
        }
        if self.config.policy.admission == KvAdmission::Peak
            && let Some(cap) = engine.limits.kv_tokens
            && engine.admitted.len() > paused.len()
        {
            let others = engine
                .admitted
                .iter()
                .filter(|a| !paused.contains(a))
                .filter_map(|a| self.jobs.get(a));
            let occupants = others.chain(std::iter::once(job)).map(|j| Occupant {
                context: f64::from(j.context()),
                remaining: j.remaining(),
            });
            let peak = expected_peak(occupants, engine.limits.block_tokens, &mut self.scratch);
            if peak > engine.headroom.get() * cap as f64 {
                self.engines[e].pressed = true;
                return false;
            }
        }
        true
    }

    pub(super) fn admit(&mut self, now: f64, id: u64, e: usize) {
        self.disarm(id);
        if let Some(q) = self.queue_of(id) {
            q.remove(id);
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.aged_at.is_some_and(|t| t <= now) {
            // Admitted by its guard: an order that counts service from there (FastServe's
            // boost to the top level) starts counting again.
            job.boosted_at = Some(job.generated);
        }
        if job.generated == 0 {
            // Its prompt is its tenant's service (once: a request paused before its first
            // token is charged again when readmitted).
            self.counters.charge(job.tenant, f64::from(job.input));
        }
        job.place = Place::Admitted;
        job.engine = Some(e);
        job.admitted_seq = self.admissions;
        self.admissions += 1;
        let engine = &mut self.engines[e];
        let block = u64::from(engine.limits.block_tokens);
        let context = job.context();
        let chunk = engine
            .report
            .step_tokens
            .map_or(context, |t| t.min(context));
        if let Some(t) = engine.report.step_tokens.as_mut() {
            *t -= chunk;
        }
        if let Some(free) = engine.report.kv_free_tokens.as_mut() {
            *free = free.saturating_sub(u64::from(chunk).div_ceil(block) * block);
        }
        engine.admitted.push(id);
        if self.config.router.needs_prefix() {
            engine.prefixes.record(&job.prefix);
        }
        if self.config.placement == Placement::WhenFree {
            // (Routed on arrival, it has counted there since.)
            engine.cost += job.routed_cost;
        }
        self.decisions.push_back(Decision::Admit { id, engine: e });
    }

    /// A preemptive policy: pause the fewest of `e`'s worst-ranked running requests (strictly
    /// worse than `id` in the order's key) that lets `id` fit; whether any were.
    pub(super) fn evict_for(&mut self, now: f64, id: u64, e: usize) -> bool {
        let spec = self.config.policy;
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        if !spec.preemptive {
            return false;
        }
        let head = order::rank(spec.order, job, &self.service, spec.preemptive);
        let mut victims: Vec<(Rank, u64, u64)> = self.engines[e]
            .admitted
            .iter()
            .filter_map(|&v| Some((v, self.jobs.get(&v)?)))
            .filter(|(_, j)| j.place == Place::Admitted && order::preemptible(spec.order, j))
            .map(|(v, j)| {
                (
                    order::rank(spec.order, j, &self.service, spec.preemptive),
                    j.seq,
                    v,
                )
            })
            // Strictly worse in the order's key: a tie-break (FastServe's arrival within a
            // level) is no reason to pause.
            .filter(|(r, _, _)| r.major > head.major)
            .collect();
        // Worst first: the highest rank, the latest arrival.
        victims.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let mut paused = Vec::new();
        for (_, _, v) in victims {
            paused.push(v);
            if self.fits(e, id, &paused) {
                for v in paused {
                    self.evict(now, v, e);
                }
                return true;
            }
        }
        false
    }

    pub(super) fn evict(&mut self, now: f64, id: u64, e: usize) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.place = Place::Waiting;
        if let Some(at) = order::own_guard(self.config.policy.order, now, job) {
            // Paused before its first token, its deadline still stands.
            let deadline = job.deadline_at.filter(|_| job.generated == 0);
            job.aged_at = earliest(Some(at), deadline);
        }
        let (context, cost) = (job.context(), job.routed_cost);
        let engine = &mut self.engines[e];
        engine.admitted.retain(|&a| a != id);
        if self.config.placement == Placement::WhenFree {
            engine.cost = (engine.cost - cost).max(0.0);
        }
        if let Some(t) = engine.report.step_tokens.as_mut() {
            *t += 1;
        }
        if let Some(free) = engine.report.kv_free_tokens.as_mut() {
            let block = u64::from(engine.limits.block_tokens);
            *free += u64::from(context).div_ceil(block) * block;
        }
        self.enqueue(id);
        self.decisions.push_back(Decision::Evict {
            id,
            engine: e,
            reason: EvictReason::Paused,
        });
    }
}
