//! Ranks: where a request stands in its policy's order (lower is served first). A waiting
//! request's rank is fixed while it waits (none of the orders changes it without service), so
//! the queue keys on it; a running request's rank, with the service it has had, decides whether
//! a preemptive policy pauses it for a waiting one.

use crate::job::Job;
use crate::policy::{Order, Size};
use crate::service::ServiceModel;

/// A place in the order: lower first, compared field by field (`f64::total_cmp`).
#[derive(Clone, Copy, Debug)]
pub struct Rank {
    /// The order's key.
    pub major: f64,
    /// Its tie-break before arrival order (FastServe's arrival within a level).
    pub minor: f64,
}

impl Rank {
    /// A rank by one key.
    pub fn of(major: f64) -> Rank {
        Rank { major, minor: 0.0 }
    }
}

impl PartialEq for Rank {
    fn eq(&self, other: &Rank) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Rank {}
impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Rank) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Rank {
    fn cmp(&self, other: &Rank) -> std::cmp::Ordering {
        self.major
            .total_cmp(&other.major)
            .then(self.minor.total_cmp(&other.minor))
    }
}

/// FastServe's base quantum (s): level `p` runs for `QUANTUM_S · 2^p` of service.
pub const QUANTUM_S: f64 = 0.010;
/// Waiting this long (s) puts a request back on FastServe's top level (its starvation guard).
pub const STARVATION_S: f64 = 10.0;
/// TRAIL: a request that generated more than this share of its first prediction is no longer
/// preempted.
pub const TRAIL_LIMIT: f64 = 0.8;

/// FastServe's level for `seconds` of service: the first whose quantum covers it.
fn level(seconds: f64) -> f64 {
    (seconds / QUANTUM_S).max(1.0).log2().ceil()
}

/// The rank of `job` with the service it has had, under `order`; `preemptive`: the scheduler
/// may pause it once it runs (which quanta the Gittins index may grant).
pub(crate) fn rank(order: Order, job: &Job, service: &ServiceModel, preemptive: bool) -> Rank {
    // Service attained: the size of what it generated beyond the size of nothing (a time
    // counts the prompt's prefill in every size, attained or not).
    let unit = |u: Size| job.size(u, f64::from(job.generated)) - job.size(u, 0.0);
    match order {
        Order::Fcfs => Rank::of(0.0),
        Order::Priority => Rank::of(-f64::from(job.priority)),
        Order::Gittins(u) if !preemptive => Rank::of(mean_remaining(job, unit(u))),
        Order::Gittins(u) | Order::GittinsAnyQuantum(u) => Rank::of(-job.sizes.gittins(unit(u))),
        Order::Ssjf => Rank::of(job.first_mean),
        Order::Trail => Rank::of(job.mean_remaining()),
        Order::FastServe => {
            let major = match job.boosted_at {
                // Skip-join: the first level whose quantum covers its prefill.
                None => level(service.service_seconds(job.input, 0))
                    .max(level(service.service_seconds(job.input, job.generated))),
                // Boosted by the starvation guard: from the top, service counted since.
                Some(base) => {
                    level(service.service_seconds(0, job.generated - base.min(job.generated)))
                }
            };
            Rank {
                major,
                minor: job.arrival,
            }
        }
        Order::Srpt => Rank::of(job.size(Size::Cost, job.lengths.max()) - unit(Size::Cost)),
    }
}

/// Whether a running `job` may be paused under `order` (every request of a preemptive order,
/// but TRAIL's beyond its limit).
pub(crate) fn preemptible(order: Order, job: &Job) -> bool {
    match order {
        Order::Trail => f64::from(job.generated) <= TRAIL_LIMIT * job.first_mean,
        _ => true,
    }
}

/// When a waiting `job` is put first by its order's own guard, if it has one: FastServe's
/// starvation guard (back to the top level after [`STARVATION_S`] of waiting; `now`: when it
/// starts waiting, on arrival or when paused).
pub(crate) fn own_guard(order: Order, now: f64, job: &Job) -> Option<f64> {
    (order == Order::FastServe).then(|| now.max(job.arrival) + STARVATION_S)
}

/// `E[S − a | S > a]` of the job's sizes, or `a` itself once the support is outlived.
fn mean_remaining(job: &Job, attained: f64) -> f64 {
    let (mut mass, mut work) = (0.0, 0.0);
    for &(s, p) in job.sizes.atoms().iter().filter(|(s, _)| *s > attained) {
        mass += p;
        work += (s - attained) * p;
    }
    if mass > 0.0 {
        work / mass
    } else {
        attained.max(1.0)
    }
}
