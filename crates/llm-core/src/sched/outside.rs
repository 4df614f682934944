//! What the driver sees of the engines from outside (scrapes, transport failures, answers),
//! applied through `crate::watch`'s rules, and the refusals an arrival would get now: the
//! decisions a gateway once made beside the scheduler, made here so every driver makes them
//! alike.

use super::{InputError, RequestScheduler, ShedReason};
use crate::watch::{Scrape, Watched};

impl RequestScheduler {
    /// A scrape of `engine` at `now`: its report, whether it answers, its token counter.
    pub(super) fn scraped(
        &mut self,
        now: f64,
        engine: usize,
        scrape: Scrape,
    ) -> Result<(), InputError> {
        let e = self.engine_mut(engine)?;
        let kv_tokens = e.limits.kv_tokens;
        let seen = e.watch.scraped(now, scrape, kv_tokens);
        if let Some(report) = seen.report {
            self.engine_report(now, engine, report)?;
        }
        if let Some(responsive) = seen.responsive {
            self.responsive(now, engine, responsive)?;
        }
        if let Some(tokens) = seen.generated {
            self.generated(now, engine, tokens)?;
        }
        Ok(())
    }

    /// A request to `engine` failed at the transport level at `now`: it is ejected unless it
    /// is out already or the last engine in service.
    pub(super) fn failed(&mut self, now: f64, engine: usize) -> Result<(), InputError> {
        self.engine_mut(engine)?;
        let others = (self.engines.iter().enumerate())
            .filter(|&(i, e)| i != engine && e.serves())
            .count();
        self.engines[engine].watch.failed(now, others);
        Ok(())
    }

    /// Put back every engine whose ejection is over at `now`, and admit there.
    pub(super) fn readmit_due(&mut self, now: f64) {
        if self.next_readmission().is_none_or(|t| t > now) {
            return;
        }
        for e in 0..self.engines.len() {
            if self.engines[e].watch.readmit(now) {
                self.decide(now, Some(e));
            }
        }
    }

    /// When the next ejection ends.
    pub(super) fn next_readmission(&self) -> Option<f64> {
        (self.engines.iter())
            .filter_map(|e| e.watch.ejected_until())
            .min_by(f64::total_cmp)
    }

    /// Whether `tenant` holds its limit of requests waiting or running.
    pub(super) fn at_tenant_limit(&self, tenant: usize) -> bool {
        let limits = &self.config.fairness.tenant_limits;
        limits
            .get(tenant)
            .copied()
            .flatten()
            .is_some_and(|limit| self.jobs.values().filter(|j| j.tenant == tenant).count() >= limit)
    }

    /// Why an arrival of `class` from `tenant` would be refused now, before anything else is
    /// known of it (a driver refuses a flood so before it predicts anything); `None`: it would
    /// not be, for these reasons (its arrival decides the rest).
    pub fn refusal(&self, class: i32, tenant: usize) -> Option<ShedReason> {
        if self.at_tenant_limit(tenant) {
            Some(ShedReason::TenantLimit)
        } else if self.none_responsive() {
            Some(ShedReason::NoEngine)
        } else if self.waiting() >= self.config.max_waiting && !self.can_displace(class) {
            Some(ShedReason::QueueFull)
        } else {
            None
        }
    }

    /// What is seen of `engine` from outside (`None`: no such engine).
    pub fn watched(&self, engine: usize) -> Option<&Watched> {
        Some(&self.engines.get(engine)?.watch)
    }
}
