//! What the scheduler keeps of one request: what arrived with it, what was predicted of it, and
//! how far it got.

use crate::gittins::SizeDistribution;
use crate::policy::{Order, Size};

/// The reference request a rank is placed against, for an engine that orders: this many
/// prompt tokens and as many answer tokens (the prior's median answer).
pub const REFERENCE_TOKENS: u32 = 256;

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In the scheduler's queue (never admitted, or paused by the policy).
    Waiting,
    /// Admitted to an engine (running there, or in its own queue).
    Admitted,
    /// Admitted, and preempted by the engine itself (its KV dropped; the engine resumes it).
    Preempted,
    /// Admitted, and evicted for a higher class: it holds its slot until its driver reports it
    /// done, and is no one's victim again.
    Displaced,
}

/// One request.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// Arrival order (ties of rank go to the earlier).
    pub seq: u64,
    /// Arrival time (s).
    pub arrival: f64,
    /// Prompt tokens.
    pub input: u32,
    /// The priority class (higher first under `priority`).
    pub priority: i32,
    /// Its tenant.
    pub tenant: usize,
    /// The predicted output lengths (tokens), capped at the request's bound.
    pub lengths: SizeDistribution,
    /// The same in the order's size unit (cost, length or time), for the Gittins and mean
    /// rules.
    pub sizes: SizeDistribution,
    /// `sagesched-time`'s seconds per prompt and per output token when it arrived.
    pub rates: Option<(f64, f64)>,
    /// The predicted mean output when it arrived (TRAIL's limit, the aging guard, the router).
    pub first_mean: f64,
    /// Output tokens generated so far.
    pub generated: u32,
    /// The engine it runs on, or is pinned to after a pause (its KV is there).
    pub engine: Option<usize>,
    /// Where it is.
    pub place: Place,
    /// When the aging guard puts it first (engine-independent; `None`: never).
    pub aged_at: Option<f64>,
    /// When its TTFT deadline puts it first (`None`: it has none, or one it cannot meet).
    pub deadline_at: Option<f64>,
    /// Its predicted cost, for the cost-aware router.
    pub routed_cost: f64,
    /// Its prompt's block hashes (`prefix-affinity`).
    pub prefix: crate::prefix::Prefix,
    /// Tokens it had generated when its guard last admitted it (FastServe counts service from
    /// there: a boosted request starts again on the top level).
    pub boosted_at: Option<u32>,
    /// Whether its first token will be reported (`Arrival::reports_first_token`).
    pub reports_first_token: bool,
    /// The engines it may go to (`Arrival::engines`; empty: any).
    pub engines: Vec<usize>,
    /// The order of its latest admission among all admissions (eviction for a higher class
    /// takes the sheddable request admitted last).
    pub admitted_seq: u64,
    /// Whether its answer has begun reaching its client (it can no longer be taken back).
    pub answering: bool,
    /// Its virtual deadline, for an engine that orders (`sched/engine_order.rs`).
    pub engine_key: f64,
}

impl Job {
    /// Those of `engines` it may go to.
    pub fn allowed(&self, mut engines: Vec<usize>) -> Vec<usize> {
        if !self.engines.is_empty() {
            engines.retain(|e| self.engines.contains(e));
        }
        engines
    }

    /// The size of `o` output tokens in `unit`.
    pub fn size(&self, unit: Size, o: f64) -> f64 {
        match (unit, self.rates) {
            (Size::Length, _) => o,
            (Size::Time, Some((a, b))) => a * f64::from(self.input) + b * o,
            // Until rates are measured, time is ordered by the paper's cost.
            (Size::Cost | Size::Time, _) => o * o / 2.0 + f64::from(self.input) * o,
        }
    }

    /// The size distribution an order ranks by.
    pub fn sizes_for(&self, order: Order) -> SizeDistribution {
        let unit = match order {
            Order::Gittins(u) | Order::GittinsAnyQuantum(u) => u,
            _ => Size::Cost,
        };
        self.lengths
            .map(|o| self.size(unit, o))
            .unwrap_or_else(|| self.lengths.clone())
    }

    /// The reference request its rank is placed against for an engine that orders
    /// (`sched/engine_order.rs`): as it, with a prompt and an answer of [`REFERENCE_TOKENS`]
    /// each.
    pub fn reference(&self, order: Order) -> Job {
        let n = REFERENCE_TOKENS;
        let mut r = Job {
            input: n,
            lengths: SizeDistribution::point(f64::from(n)).unwrap_or_else(|| self.lengths.clone()),
            generated: 0,
            boosted_at: None,
            ..self.clone()
        };
        r.first_mean = f64::from(n);
        r.sizes = r.sizes_for(order);
        r
    }

    /// Tokens it holds in KV once prefilled (prompt and generated).
    pub fn context(&self) -> u32 {
        self.input.saturating_add(self.generated)
    }

    /// The predicted remaining output as (tokens, probability), given what it generated: the
    /// atoms beyond it renormalized, or, past the whole support, as much again as it generated
    /// (what the Gittins index assumes there too), at least one token.
    pub fn remaining(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let g = f64::from(self.generated);
        let beyond: f64 = self
            .lengths
            .atoms()
            .iter()
            .filter(|(s, _)| *s > g)
            .map(|(_, p)| p)
            .sum();
        let past = (beyond <= 0.0).then_some((g.max(1.0), 1.0));
        self.lengths
            .atoms()
            .iter()
            .filter(move |(s, _)| beyond > 0.0 && *s > g)
            .map(move |&(s, p)| (s - g, p / beyond))
            .chain(past)
    }

    /// The predicted mean remaining output (TRAIL's refined prediction).
    pub fn mean_remaining(&self) -> f64 {
        self.remaining().map(|(d, p)| d * p).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::cost;

    fn job(lengths: &[f64], generated: u32) -> Job {
        let lengths = SizeDistribution::from_valid_samples(lengths, 1.0);
        Job {
            seq: 0,
            arrival: 0.0,
            input: 100,
            priority: 0,
            tenant: 0,
            first_mean: lengths.mean(),
            sizes: lengths.clone(),
            lengths,
            rates: None,
            generated,
            engine: None,
            place: Place::Waiting,
            aged_at: None,
            deadline_at: None,
            routed_cost: 0.0,
            boosted_at: None,
            prefix: Default::default(),
            reports_first_token: false,
            engines: Vec::new(),
            admitted_seq: 0,
            answering: false,
            engine_key: 0.0,
        }
    }

    #[test]
    fn the_remaining_output_is_the_distribution_beyond_what_was_generated() {
        let j = job(&[10.0, 20.0, 40.0], 15);
        let r: Vec<(f64, f64)> = j.remaining().collect();
        assert_eq!(r.len(), 2);
        assert!((r[0].0 - 5.0).abs() < 1e-12 && (r[0].1 - 0.5).abs() < 1e-12);
        assert!((j.mean_remaining() - 15.0).abs() < 1e-12);
        let past = job(&[10.0], 30);
        assert_eq!(past.remaining().collect::<Vec<_>>(), vec![(30.0, 1.0)]);
        assert_eq!(
            job(&[10.0], 0).remaining().collect::<Vec<_>>(),
            vec![(10.0, 1.0)]
        );
    }

    #[test]
    fn sizes_follow_the_unit() {
        let mut j = job(&[10.0], 0);
        assert_eq!(j.size(Size::Length, 10.0), 10.0);
        assert_eq!(j.size(Size::Cost, 10.0), cost(100, 10));
        assert_eq!(
            j.size(Size::Time, 10.0),
            cost(100, 10),
            "unmeasured: the cost"
        );
        j.rates = Some((0.001, 0.01));
        assert!((j.size(Size::Time, 10.0) - 0.2).abs() < 1e-12);
    }
}
