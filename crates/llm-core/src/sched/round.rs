//! The decision round: after an input that can change who may run, admit what fits, in the
//! policy's order, to the engine the router prefers, and, under a preemptive policy, pause
//! worse-ranked running requests where that makes the head fit. It never skips the head (vLLM's
//! rule), except a head limited to some engines, set aside for the round. The round borrows
//! the book and writes its decisions; whether a request fits is `fit.rs`'s to say.

use super::arrival::earliest;
use super::book::Book;
use super::fit::{Fit, FitRules, fit};
use super::{Config, Decision, EvictReason, Placement, displace};
use crate::job::{Job, Place};
use crate::order::{self, Rank};
use crate::service::ServiceModel;
use std::collections::VecDeque;

/// One round over the book.
pub(super) struct Round<'a> {
    pub(super) config: &'a Config,
    pub(super) service: &'a ServiceModel,
    pub(super) book: &'a mut Book,
    pub(super) out: &'a mut VecDeque<Decision>,
    /// Whether requests above the standard class are about ([`super::HIGH_CLASS_WINDOW`]).
    pub(super) high_class_about: bool,
}

impl Round<'_> {
    /// Admit what fits, in order, pausing where a preemptive policy gains by it. What happened
    /// concerns `engine` (a completion there, its report), or, with `None`, the queue (an
    /// arrival): only that engine's room, or its queue placed on arrival, can have changed, so
    /// only that engine is asked; an arrival asks every engine, in the router's order.
    pub(super) fn decide(&mut self, now: f64, engine: Option<usize>) {
        match self.config.placement {
            Placement::WhenFree => {
                self.book.waiting.promote(None, now);
                // A head limited to some engines (a proxy's subset) that fit it not holds back
                // no one who may go elsewhere: it is set aside for the round, keeping its place.
                let mut aside = Vec::new();
                loop {
                    if self.serve_shared(now, engine) {
                        continue;
                    }
                    let book = &mut *self.book;
                    match book.waiting.first(None) {
                        Some(id) if book.jobs.get(&id).is_some_and(|j| !j.engines.is_empty()) => {
                            book.waiting.remove(id, None);
                            aside.push(id);
                        }
                        _ => break,
                    }
                }
                for id in aside {
                    self.book.enqueue(id, false, self.config, self.service);
                }
            }
            Placement::AtArrival => {
                if let Some(e) = engine.filter(|&e| e < self.book.engines.len()) {
                    self.book.waiting.promote(Some(e), now);
                    while self.serve_engine(now, e) {}
                }
            }
        }
    }

    /// Admit the shared queue's head on `only` or, with `None`, anywhere; whether it was.
    fn serve_shared(&mut self, now: f64, only: Option<usize>) -> bool {
        let Some(id) = self.book.waiting.first(None) else {
            return false;
        };
        let pinned = self.book.jobs.get(&id).and_then(|j| j.engine);
        let eligible: Vec<usize> = match (pinned, only) {
            (Some(p), Some(o)) if p != o => return false,
            (Some(e), _) | (None, Some(e)) => vec![e],
            (None, None) => (0..self.book.engines.len()).collect(),
        };
        let eligible = match self.book.jobs.get(&id) {
            Some(j) => j.allowed(eligible),
            None => eligible,
        };
        // The router's favourite that has room (asking engines in its order of preference).
        let prefix = self.book.jobs.get(&id).map_or(&[][..], |j| &j.prefix);
        let router = self.config.router;
        let loads = self.book.loads(prefix, router);
        let order = router.preference(&eligible, &loads, self.book.turn);
        if let Some(e) = order.into_iter().find(|&e| self.fits(e, id, &[])) {
            self.book.turn = e + 1;
            self.admit(now, id, e);
            return true;
        }
        eligible.into_iter().any(|e| self.evict_for(now, id, e))
    }

    /// Admit engine `e`'s own queue head; whether it was.
    fn serve_engine(&mut self, now: f64, e: usize) -> bool {
        let Some(id) = self.book.waiting.first(Some(e)) else {
            return false;
        };
        if self.fits(e, id, &[]) {
            self.admit(now, id, e);
            return true;
        }
        self.evict_for(now, id, e)
    }

    /// Whether request `id` fits engine `e` were `paused` (running there) not.
    fn fits(&mut self, e: usize, id: u64, paused: &[u64]) -> bool {
        let book = &mut *self.book;
        let Some(job) = book.jobs.get(&id) else {
            return false;
        };
        let rules = FitRules {
            config: self.config,
            high_class_about: self.high_class_about,
        };
        match fit(
            &book.engines[e],
            job,
            &book.jobs,
            paused,
            &rules,
            &mut book.scratch,
        ) {
            Fit::Fits => true,
            Fit::No => false,
            Fit::Pressed => {
                book.engines[e].pressed = true;
                false
            }
        }
    }

    /// Admit waiting request `id` to engine `e`.
    fn admit(&mut self, now: f64, id: u64, e: usize) {
        let (config, book) = (self.config, &mut *self.book);
        book.displacer.disarm(id);
        let Some(job) = book.jobs.get_mut(&id) else {
            return;
        };
        book.waiting.remove(id, job.engine);
        if job.aged_at.is_some_and(|t| t <= now) {
            // Admitted by its guard: an order that counts service from there (FastServe's
            // boost to the top level) starts counting again.
            job.boosted_at = Some(job.generated);
        }
        if job.generated == 0 {
            // Its prompt is its tenant's service (once: a request paused before its first
            // token is charged again when readmitted).
            (book.waiting.counters).charge(job.tenant, f64::from(job.input));
        }
        job.place = Place::Admitted;
        job.engine = Some(e);
        job.admitted_seq = book.admissions;
        book.admissions += 1;
        let prefix = config.router.needs_prefix().then_some(&job.prefix[..]);
        // (Routed on arrival, it has counted there since.)
        let cost = (config.placement == Placement::WhenFree).then_some(job.routed_cost);
        book.engines[e].take(id, job.context(), prefix, cost);
        self.out.push_back(Decision::Admit { id, engine: e });
    }

    /// A preemptive policy: pause the fewest of `e`'s worst-ranked running requests (strictly
    /// worse than `id` in the order's key) that lets `id` fit; whether any were.
    fn evict_for(&mut self, now: f64, id: u64, e: usize) -> bool {
        let spec = self.config.policy;
        let Some(job) = self.book.jobs.get(&id) else {
            return false;
        };
        if !spec.preemptive {
            return false;
        }
        let rank = |j: &Job| order::rank(spec.order, j, self.service, spec.preemptive);
        let head = rank(job);
        let mut victims: Vec<(Rank, u64, u64)> = (self.book.engines[e].admitted.iter())
            .filter_map(|&v| Some((v, self.book.jobs.get(&v)?)))
            .filter(|(_, j)| j.place == Place::Admitted && order::preemptible(spec.order, j))
            .map(|(v, j)| (rank(j), j.seq, v))
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

    /// Pause running request `id` on engine `e`: it waits again at its rank.
    fn evict(&mut self, now: f64, id: u64, e: usize) {
        let Some(job) = self.book.jobs.get_mut(&id) else {
            return;
        };
        job.place = Place::Waiting;
        if let Some(at) = order::own_guard(self.config.policy.order, now, job) {
            // Paused before its first token, its deadline still stands.
            let deadline = job.deadline_at.filter(|_| job.generated == 0);
            job.aged_at = earliest(Some(at), deadline);
        }
        let (context, cost) = (job.context(), job.routed_cost);
        let counted = (self.config.placement == Placement::WhenFree).then_some(cost);
        self.book.engines[e].pause(id, context, counted);
        self.book.enqueue(id, true, self.config, self.service);
        self.out.push_back(Decision::Evict {
            id,
            engine: e,
            reason: EvictReason::Paused,
        });
    }

    /// Evict running sheddable requests for a request above the standard class, as many as
    /// the eviction rule says, the one admitted last first.
    pub(super) fn displace(&mut self) {
        let most = self.config.fairness.eviction.victims();
        for (victim, engine) in displace::victims(&self.book.jobs, most) {
            if let Some(j) = self.book.jobs.get_mut(&victim) {
                j.place = Place::Displaced;
            }
            self.out.push_back(Decision::Evict {
                id: victim,
                engine,
                reason: EvictReason::Displaced,
            });
        }
    }
}
