//! What the scheduler keeps of each engine: its limits, what it runs, its last report less what
//! was admitted since, the predicted cost sent to it, its learned KV headroom and concurrency,
//! and what is seen of it from outside. Each change of an engine's account (a request taken on,
//! paused, released, taken back; a report; a learner's new limit) is one method here, so the
//! round that decides and the rules that reclaim keep one account of each engine.

use super::{Config, EngineLimits, EngineReport};
use crate::admit::Headroom;
use crate::learn::Learner;
use crate::prefix::PrefixCache;
use crate::watch::Watched;

/// What the scheduler keeps of one engine.
#[derive(Debug)]
pub(super) struct EngineView {
    pub(super) limits: EngineLimits,
    /// Requests admitted and not done, in admission order.
    pub(super) admitted: Vec<u64>,
    /// Its last report, less what was admitted since.
    pub(super) report: EngineReport,
    /// The predicted cost of what was sent to it and is not done: admitted, or (placed on
    /// arrival) routed there and waiting.
    pub(super) cost: f64,
    pub(super) headroom: Headroom,
    /// Whether expected-peak admission held a request back since the last completion.
    pub(super) pressed: bool,
    /// Whether it may be sent requests.
    pub(super) up: bool,
    /// The prompt prefixes sent to it (`prefix-affinity`).
    pub(super) prefixes: PrefixCache,
    /// Its concurrency learner ([`Config::learn_concurrency`]).
    learner: Option<Learner>,
    /// Whether it answers at all (`reclaim.rs`).
    pub(super) responsive: bool,
    /// Whether it orders its own queue by the numbers it is sent (`engine_order.rs`).
    pub(super) orders: bool,
    /// What is seen of it from outside: metrics, failures, ejection (`crate::watch`).
    pub(super) watch: Watched,
}

impl EngineView {
    /// Engine `limits` of a scheduler configured by `config`, as it starts: up, answering,
    /// empty.
    pub(super) fn new(limits: EngineLimits, config: &Config) -> EngineView {
        EngineView {
            limits: EngineLimits {
                block_tokens: limits.block_tokens.max(1),
                ..limits
            },
            admitted: Vec::new(),
            report: EngineReport::default(),
            cost: 0.0,
            headroom: Headroom::default(),
            pressed: false,
            up: true,
            prefixes: PrefixCache::default(),
            learner: config
                .learn_concurrency
                .then(|| Learner::new(limits.concurrency)),
            responsive: true,
            orders: config.engine_order.is_some(),
            watch: Watched::default(),
        }
    }

    /// Whether it may be sent requests: up, answering, and not ejected.
    pub(super) fn serves(&self) -> bool {
        self.up && self.responsive && self.watch.ejected_until().is_none()
    }

    /// Requests it runs at once: its limit, or its slots where it reports fewer, or the
    /// learned limit where that is fewer still.
    pub(super) fn concurrency(&self) -> usize {
        let most = self.report.slots.map_or(self.limits.concurrency, |s| {
            s.clamp(1, self.limits.concurrency)
        });
        self.learner
            .as_ref()
            .map_or(most, |l| l.limit().clamp(1, most))
    }

    /// Whether it serves with a slot free.
    pub(super) fn slot_free(&self) -> bool {
        self.serves() && self.admitted.len() < self.concurrency()
    }

    /// `tokens` rounded up to whole KV blocks.
    fn blocks(&self, tokens: u32) -> u64 {
        let block = u64::from(self.limits.block_tokens);
        u64::from(tokens).div_ceil(block) * block
    }

    /// Take on request `id` of `context` tokens: its first step's chunk comes off the room
    /// last reported, its `prefix` is remembered, and its `cost` (where it did not count here
    /// since its arrival) counts.
    pub(super) fn take(
        &mut self,
        id: u64,
        context: u32,
        prefix: Option<&[u64]>,
        cost: Option<f64>,
    ) {
        let chunk = self.report.step_tokens.map_or(context, |t| t.min(context));
        if let Some(t) = self.report.step_tokens.as_mut() {
            *t -= chunk;
        }
        let chunk_blocks = self.blocks(chunk);
        if let Some(free) = self.report.kv_free_tokens.as_mut() {
            *free = free.saturating_sub(chunk_blocks);
        }
        self.admitted.push(id);
        if let Some(prefix) = prefix {
            self.prefixes.record(prefix);
        }
        if let Some(cost) = cost {
            self.cost += cost;
        }
    }

    /// Pause running request `id` of `context` tokens: its slot, a step's token and its KV
    /// come back, and its `cost`, where it counts only while admitted, goes.
    pub(super) fn pause(&mut self, id: u64, context: u32, cost: Option<f64>) {
        self.admitted.retain(|&a| a != id);
        if let Some(cost) = cost {
            self.cost = (self.cost - cost).max(0.0);
        }
        if let Some(t) = self.report.step_tokens.as_mut() {
            *t += 1;
        }
        let blocks = self.blocks(context);
        if let Some(free) = self.report.kv_free_tokens.as_mut() {
            *free += blocks;
        }
    }

    /// Request `id`, sent here, is gone: its `cost` (where it counts) goes, and, if it was
    /// `admitted`, its slot, and the headroom learns that it completed.
    pub(super) fn release(&mut self, id: u64, admitted: bool, cost: Option<f64>) {
        if let Some(cost) = cost {
            self.cost = (self.cost - cost).max(0.0);
        }
        if admitted {
            self.admitted.retain(|&a| a != id);
            self.headroom.completed(self.pressed);
            self.pressed = false;
        }
    }

    /// Admitted request `id` of `cost` is taken back (the engine stopped answering).
    pub(super) fn take_back(&mut self, id: u64, cost: f64) {
        self.admitted.retain(|&a| a != id);
        self.cost = (self.cost - cost).max(0.0);
    }

    /// Its report: its slots bound its learner; the learner's new limit, if any.
    pub(super) fn reported(&mut self, report: EngineReport) -> Option<usize> {
        let bounded = (report.slots).and_then(|slots| self.learner.as_mut()?.bound(slots));
        self.report = report;
        bounded
    }

    /// Feed its learner, if it has one; the learner's new limit, if any.
    pub(super) fn learn(
        &mut self,
        feed: impl FnOnce(&mut Learner) -> Option<usize>,
    ) -> Option<usize> {
        self.learner.as_mut().and_then(feed)
    }

    /// The concurrency learned (`None`: not learned).
    pub(super) fn learned(&self) -> Option<usize> {
        Some(self.learner.as_ref()?.limit())
    }
}

/// When the first of `engines`' ejections ends.
pub(super) fn next_readmission(engines: &[EngineView]) -> Option<f64> {
    (engines.iter())
        .filter_map(|e| e.watch.ejected_until())
        .min_by(f64::total_cmp)
}
