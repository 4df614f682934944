//! The waiting queue in lanes: priority classes first, then tenants sharing by tokens, then the
//! policy's own order.
//!
//! Production gateways serve classes and tenants (docs: `../shared/docs/GATEWAYS.md`): llm-d's
//! `InferenceObjective` priority (higher wins, below 0 sheddable) and its fairness id, vLLM's
//! request priority. Here every waiting request sits in the lane of its (class, tenant). The
//! next request is the head, in the policy's order (aging guard included), of one lane: the
//! highest class with any request waiting, and within it the tenant that has received the
//! least weighted service so far, by the Virtual Token Counter (VTC, Sheng et al., OSDI'24):
//! each tenant's counter grows by its prompt tokens when a request is admitted and by
//! [`OUTPUT_TOKEN_WEIGHT`] per output token as they are generated, divided by the tenant's
//! weight; a tenant that starts waiting after none of its requests did is lifted to the least
//! counter among those waiting (or the last served tenant's), so idle time banks no credit.
//!
//! With one class and one tenant (the default) there is one lane and the order is the
//! policy's, unchanged.

use crate::order::Rank;
use crate::queue::Queue;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

/// An output token costs this many prompt tokens in a tenant's counter (VTC's and llm-d's 2).
pub const OUTPUT_TOKEN_WEIGHT: f64 = 2.0;

/// A lane: its class (higher first), then its tenant.
type Lane = (Reverse<i32>, usize);

/// The tenants' virtual token counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Weighted service received, per tenant (divided by its weight).
    service: Vec<f64>,
    /// Each tenant's weight (a tenant beyond the list weighs 1).
    weights: Vec<f64>,
    /// The counter of the tenant served last.
    last_served: f64,
}

impl Counters {
    /// Counters for tenants of `weights` (each at least a millionth).
    pub fn new(weights: &[f64]) -> Counters {
        Counters {
            service: Vec::new(),
            weights: weights
                .iter()
                .map(|w| if w.is_finite() { w.max(1e-6) } else { 1.0 })
                .collect(),
            last_served: 0.0,
        }
    }

    fn slot(&mut self, tenant: usize) -> &mut f64 {
        if self.service.len() <= tenant {
            self.service.resize(tenant + 1, 0.0);
        }
        &mut self.service[tenant]
    }

    /// `tenant`'s counter.
    pub fn get(&self, tenant: usize) -> f64 {
        self.service.get(tenant).copied().unwrap_or(0.0)
    }

    /// `tenant` was served `tokens` (prompt-token equivalents).
    pub fn charge(&mut self, tenant: usize, tokens: f64) {
        self.last_served = self.add(tenant, tokens);
    }

    /// `tenant`'s service so far was `tokens` more than charged (fewer, when negative): a
    /// correction, not service now (the counter tenants start from is left alone).
    pub fn correct(&mut self, tenant: usize, tokens: f64) {
        self.add(tenant, tokens);
    }

    /// Where `tenant`'s counter stands between the least- and the most-served tenant's, from 0
    /// to 1 (0 while every tenant is alike).
    pub fn lead(&self, tenant: usize) -> f64 {
        let (lo, hi) = self
            .service
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &c| {
                (lo.min(c), hi.max(c))
            });
        if hi > lo {
            ((self.get(tenant) - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    fn add(&mut self, tenant: usize, tokens: f64) -> f64 {
        let w = self.weights.get(tenant).copied().unwrap_or(1.0);
        let c = self.slot(tenant);
        *c += tokens / w;
        *c
    }
}

/// Waiting requests in lanes.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    lanes: BTreeMap<Lane, Queue>,
    /// Each waiting request's lane.
    of: HashMap<u64, Lane>,
}

impl Lanes {
    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.of.len()
    }

    /// Whether `tenant` has a request waiting.
    fn waits(&self, tenant: usize) -> bool {
        self.lanes.keys().any(|l| l.1 == tenant)
    }

    /// Queue `id` of `class` and `tenant` at `rank` (arrival `seq`), aging at `aged_at`; a
    /// tenant that had nothing waiting is lifted in `counters` first.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        id: u64,
        class: i32,
        tenant: usize,
        rank: Rank,
        seq: u64,
        aged_at: Option<f64>,
        counters: &mut Counters,
    ) {
        self.remove(id);
        if !self.waits(tenant) {
            let floor = self
                .lanes
                .keys()
                .map(|l| counters.get(l.1))
                .reduce(f64::min)
                .unwrap_or(counters.last_served);
            let c = counters.slot(tenant);
            *c = c.max(floor);
        }
        self.put_back(id, class, tenant, rank, seq, aged_at);
    }

    /// Queue `id` (not in the lanes now) as [`Lanes::push`] does, without lifting its tenant: it
    /// was waiting all along (set aside for a moment).
    pub fn put_back(
        &mut self,
        id: u64,
        class: i32,
        tenant: usize,
        rank: Rank,
        seq: u64,
        aged_at: Option<f64>,
    ) {
        let lane = (Reverse(class), tenant);
        self.lanes
            .entry(lane)
            .or_default()
            .push(id, rank, seq, aged_at);
        self.of.insert(id, lane);
    }

    /// Take `id` out; whether it was there.
    pub fn remove(&mut self, id: u64) -> bool {
        let Some(lane) = self.of.remove(&id) else {
            return false;
        };
        if let Some(q) = self.lanes.get_mut(&lane) {
            q.remove(id);
            if q.len() == 0 {
                self.lanes.remove(&lane);
            }
        }
        true
    }

    /// Let every lane's aging guard see `now`.
    pub fn promote(&mut self, now: f64) {
        for q in self.lanes.values_mut() {
            q.promote(now);
        }
    }

    /// The request served next: the head of the highest class's lane whose tenant has the least
    /// counter (ties to the lower tenant).
    pub fn first(&self, counters: &Counters) -> Option<u64> {
        let top = self.lanes.keys().next()?.0;
        self.lanes
            .range((top, 0)..=(top, usize::MAX))
            .min_by(|a, b| counters.get(a.0.1).total_cmp(&counters.get(b.0.1)))
            .and_then(|(_, q)| q.first())
    }

    /// The newest request of the lowest class below `class` whose class is sheddable (below
    /// 0): what an arrival of `class` may displace from a full queue.
    pub fn displaceable(&self, class: i32) -> Option<u64> {
        let lowest = self.lanes.keys().next_back()?.0.0;
        if lowest >= 0 || lowest >= class {
            return None;
        }
        // Of that class's lanes, the latest arrival.
        self.lanes
            .range((Reverse(lowest), 0)..=(Reverse(lowest), usize::MAX))
            .filter_map(|(_, q)| q.newest())
            .max_by_key(|&(seq, _)| seq)
            .map(|(_, id)| id)
    }

    /// Sheddable requests (class below 0) waiting.
    pub fn sheddable(&self) -> usize {
        self.lanes
            .iter()
            .filter(|(l, _)| l.0.0 < 0)
            .map(|(_, q)| q.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(l: &mut Lanes, c: &mut Counters, id: u64, class: i32, tenant: usize) {
        l.push(id, class, tenant, Rank::of(id as f64), id, None, c);
    }

    #[test]
    fn the_highest_class_first_then_the_least_served_tenant() {
        let (mut l, mut c) = (Lanes::default(), Counters::new(&[]));
        push(&mut l, &mut c, 1, 0, 0);
        push(&mut l, &mut c, 2, 0, 1);
        push(&mut l, &mut c, 3, 1, 1);
        assert_eq!(l.first(&c), Some(3), "class 1 before class 0");
        l.remove(3);
        c.charge(0, 100.0);
        assert_eq!(l.first(&c), Some(2), "tenant 1 has been served less");
        c.charge(1, 300.0);
        assert_eq!(l.first(&c), Some(1));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn a_tenants_lead_is_where_it_stands_between_the_least_and_most_served() {
        let mut c = Counters::new(&[1.0, 1.0, 2.0]);
        assert_eq!(c.lead(0), 0.0);
        c.charge(0, 100.0);
        c.charge(1, 50.0);
        c.charge(2, 100.0);
        assert_eq!((c.lead(0), c.lead(1), c.lead(2)), (1.0, 0.0, 0.0));
        // A tenant not seen yet counts as the least served.
        assert_eq!(c.lead(7), 0.0);
    }

    #[test]
    fn a_weight_divides_the_service_counted() {
        let mut c = Counters::new(&[3.0]);
        c.charge(0, 300.0);
        c.charge(1, 100.0);
        assert_eq!(c.get(0), c.get(1), "weight 3 counts a third");
    }

    #[test]
    fn a_tenant_that_starts_waiting_is_lifted_to_the_least_waiting_counter() {
        let (mut l, mut c) = (Lanes::default(), Counters::new(&[]));
        c.charge(1, 800.0);
        c.charge(0, 500.0);
        push(&mut l, &mut c, 1, 0, 0);
        push(&mut l, &mut c, 2, 0, 1);
        assert_eq!((c.get(0), c.get(1)), (500.0, 800.0), "never lowered");
        // Tenant 2 was idle: it banks no credit from that.
        push(&mut l, &mut c, 3, 0, 2);
        assert_eq!(c.get(2), 500.0);
        // With nothing waiting, a newcomer starts at the last served tenant's counter.
        let (mut l, mut c) = (Lanes::default(), Counters::new(&[]));
        c.charge(4, 70.0);
        push(&mut l, &mut c, 9, 0, 5);
        assert_eq!(c.get(5), 70.0);
    }

    #[test]
    fn only_a_lower_sheddable_class_is_displaced_newest_first() {
        let (mut l, mut c) = (Lanes::default(), Counters::new(&[]));
        push(&mut l, &mut c, 1, 0, 0);
        assert_eq!(l.displaceable(1), None, "class 0 is not sheddable");
        push(&mut l, &mut c, 2, -1, 0);
        push(&mut l, &mut c, 3, -1, 1);
        push(&mut l, &mut c, 4, -2, 0);
        assert_eq!(l.displaceable(0), Some(4), "the lowest class");
        assert_eq!(l.displaceable(-2), None, "not by its own class");
        l.remove(4);
        assert_eq!(l.displaceable(0), Some(3), "the newest of class -1");
        assert_eq!(l.sheddable(), 2);
    }
}
