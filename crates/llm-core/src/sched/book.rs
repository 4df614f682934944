//! The book: every request the scheduler holds, where it is (waiting in a queue, or on an
//! engine), and the moves that keep every account right when a request changes place: queued at
//! its rank, routed on arrival, taken back from an engine, forgotten, and what a request's
//! progress changes in its tenant's account. It makes no decision: the round decides who is
//! admitted or paused, the state machine when; the book records it.

use super::displace::Displacer;
use super::engines::EngineView;
use super::waiting::Waiting;
use super::{Config, Placement};
use crate::job::{Job, Place};
use crate::lanes::OUTPUT_TOKEN_WEIGHT;
use crate::order;
use crate::route::{EngineLoad, Router};
use crate::service::ServiceModel;
use std::collections::BTreeMap;

/// Every request held and every engine's account.
#[derive(Debug)]
pub(super) struct Book {
    pub(super) jobs: BTreeMap<u64, Job>,
    pub(super) waiting: Waiting,
    pub(super) engines: Vec<EngineView>,
    pub(super) displacer: Displacer,
    /// The router's turn (round robin).
    pub(super) turn: usize,
    /// Admissions so far (each job's `admitted_seq`).
    pub(super) admissions: u64,
    /// Room for the expected-peak rule's arithmetic.
    pub(super) scratch: Vec<(f64, f64, f64)>,
}

impl Book {
    /// An empty book for `config`.
    pub(super) fn new(config: &Config) -> Book {
        let engines: Vec<EngineView> = (config.engines.iter())
            .map(|&limits| EngineView::new(limits, config))
            .collect();
        Book {
            jobs: BTreeMap::new(),
            waiting: Waiting::new(config.placement, engines.len(), &config.fairness.weights),
            engines,
            displacer: Displacer::default(),
            turn: 0,
            admissions: 0,
            scratch: Vec::new(),
        }
    }

    /// Put waiting `id` in its queue at its current rank, its tenant lifted if it is new
    /// (`arriving`), or not (put back after being set aside).
    pub(super) fn enqueue(&mut self, id: u64, arriving: bool, config: &Config, s: &ServiceModel) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        let spec = config.policy;
        let rank = order::rank(spec.order, j, s, spec.preemptive);
        self.waiting.push(id, j, rank, arriving);
    }

    /// Drop `id` from wherever it is.
    pub(super) fn forget(&mut self, id: u64, placement: Placement) {
        self.displacer.disarm(id);
        let Some(j) = self.jobs.remove(&id) else {
            return;
        };
        self.waiting.remove(id, j.engine);
        let Some(e) = j.engine.and_then(|e| self.engines.get_mut(e)) else {
            return;
        };
        let admitted = j.place != Place::Waiting;
        let counted = admitted || placement == Placement::AtArrival;
        e.release(id, admitted, counted.then_some(j.routed_cost));
    }

    /// Request `id` has generated `generated` tokens: its tenant is charged for them; the
    /// engine of a request above or below the standard class at its first token.
    pub(super) fn progress(&mut self, id: u64, generated: u32) -> Option<usize> {
        let j = self.jobs.get_mut(&id)?;
        let more = generated.saturating_sub(j.generated);
        (self.waiting.counters).charge(j.tenant, OUTPUT_TOKEN_WEIGHT * f64::from(more));
        let first_token = j.generated == 0 && generated > 0 && j.priority != 0;
        j.generated = j.generated.max(generated);
        if j.place == Place::Preempted {
            j.place = Place::Admitted;
        }
        j.engine.filter(|_| first_token)
    }

    /// The engine counted request `id`'s prompt as `tokens`.
    pub(super) fn prompt(&mut self, id: u64, tokens: u32) {
        if let Some(j) = self.jobs.get_mut(&id) {
            if j.place != Place::Waiting || j.generated > 0 {
                // Charged at admission (only then): the difference now.
                let difference = f64::from(tokens) - f64::from(j.input);
                self.waiting.counters.correct(j.tenant, difference);
            }
            j.input = tokens;
        }
    }

    /// The engine preempted request `id` (its KV dropped): its engine's headroom learns.
    pub(super) fn preempted(&mut self, id: u64) {
        if let Some(j) = self.jobs.get_mut(&id)
            && j.place == Place::Admitted
        {
            j.place = Place::Preempted;
            if let Some(e) = j.engine {
                self.engines[e].headroom.preempted();
            }
        }
    }

    /// Placed on arrival: route `job` now, among the engines that serve (all of them if none
    /// does); its predicted cost counts there from now.
    pub(super) fn route(&mut self, job: &mut Job, config: &Config) {
        if config.placement != Placement::AtArrival {
            return;
        }
        let allowed = job.allowed((0..self.engines.len()).collect());
        let serving: Vec<usize> = (allowed.iter().copied())
            .filter(|&e| self.engines[e].serves())
            .collect();
        let all: Vec<usize> = if serving.is_empty() { allowed } else { serving };
        let loads = self.loads(&job.prefix, config.router);
        job.engine = config.router.pick(&all, &loads, &mut self.turn);
        if let Some(e) = job.engine {
            self.engines[e].cost += job.routed_cost;
        }
    }

    /// Take admitted request `id` back from `engine`: it waits again, unrouted (or routed
    /// again, placed on arrival), at its rank; whether it was there to take.
    pub(super) fn take_back(
        &mut self,
        id: u64,
        engine: usize,
        config: &Config,
        s: &ServiceModel,
    ) -> bool {
        let Some(mut job) = self.jobs.remove(&id) else {
            return false;
        };
        self.engines[engine].take_back(id, job.routed_cost);
        // Its prompt is charged again when it is admitted again.
        (self.waiting.counters).correct(job.tenant, -f64::from(job.input));
        job.place = Place::Waiting;
        job.engine = None;
        self.route(&mut job, config);
        self.jobs.insert(id, job);
        self.enqueue(id, true, config, s);
        true
    }

    /// What `router` sees of each engine, for a request of `prefix`.
    pub(super) fn loads(&self, prefix: &[u64], router: Router) -> Vec<EngineLoad> {
        let prefixed = router.needs_prefix() && !prefix.is_empty();
        (self.engines.iter().enumerate())
            .map(|(i, e)| {
                // Routed here on arrival and still waiting counts too.
                let queued = self.waiting.own_len(i);
                EngineLoad {
                    outstanding: e.admitted.len() + queued,
                    waiting: e.report.waiting + queued,
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
                }
            })
            .collect()
    }

    /// Whether `engine` (or, with `None`, any engine) is up with a slot free.
    pub(super) fn slot_free(&self, engine: Option<usize>) -> bool {
        match engine {
            Some(e) => self.engines.get(e).is_some_and(EngineView::slot_free),
            None => self.engines.iter().any(EngineView::slot_free),
        }
    }

    /// Whether `tenant` holds `limits`' bound of requests waiting or running.
    pub(super) fn at_tenant_limit(&self, tenant: usize, limits: &[Option<usize>]) -> bool {
        (limits.get(tenant).copied().flatten())
            .is_some_and(|limit| self.jobs.values().filter(|j| j.tenant == tenant).count() >= limit)
    }
}
