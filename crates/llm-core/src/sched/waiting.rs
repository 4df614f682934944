//! Where requests wait, in the policy's order: the one queue, or (placed on arrival) a queue per
//! engine, each of lanes by class and tenant (`crate::lanes`), and the tenants' service that
//! orders the lanes. A request waits in the queue its placement and engine name; this part
//! knows nothing of engines' room or of decisions, only the order of who waits.

use super::Placement;
use crate::job::Job;
use crate::lanes::{Counters, Lanes};
use crate::order::Rank;

/// The queues and the tenants' service.
#[derive(Debug)]
pub(super) struct Waiting {
    placement: Placement,
    /// The one queue ([`Placement::WhenFree`]).
    shared: Lanes,
    /// Each engine's own queue ([`Placement::AtArrival`]).
    own: Vec<Lanes>,
    /// The tenants' service so far.
    pub(super) counters: Counters,
}

impl Waiting {
    /// Empty queues for `engines` engines, tenants weighed by `weights`.
    pub(super) fn new(placement: Placement, engines: usize, weights: &[f64]) -> Waiting {
        Waiting {
            placement,
            shared: Lanes::default(),
            own: (0..engines).map(|_| Lanes::default()).collect(),
            counters: Counters::new(weights),
        }
    }

    /// Requests waiting in every queue.
    pub(super) fn len(&self) -> usize {
        self.shared.len() + self.own.iter().map(Lanes::len).sum::<usize>()
    }

    /// Requests waiting in engine `e`'s own queue.
    pub(super) fn own_len(&self, e: usize) -> usize {
        self.own.get(e).map_or(0, Lanes::len)
    }

    /// The queue a request routed to `engine` waits in.
    pub(super) fn lanes(&self, engine: Option<usize>) -> &Lanes {
        match (self.placement, engine) {
            (Placement::AtArrival, Some(e)) => &self.own[e],
            _ => &self.shared,
        }
    }

    fn lanes_mut(&mut self, engine: Option<usize>) -> &mut Lanes {
        match (self.placement, engine) {
            (Placement::AtArrival, Some(e)) => &mut self.own[e],
            _ => &mut self.shared,
        }
    }

    /// Whether an arrival of `class` would find a sheddable request of a lower class waiting
    /// to displace, in any queue.
    pub(super) fn can_displace(&self, class: i32) -> bool {
        std::iter::once(&self.shared)
            .chain(&self.own)
            .any(|l| l.displaceable(class).is_some())
    }

    /// Put waiting `job` (request `id`) in its queue at `rank`, its tenant lifted if it is new
    /// (`arriving`), or not (put back after being set aside).
    pub(super) fn push(&mut self, id: u64, job: &Job, rank: Rank, arriving: bool) {
        let (seq, aged_at, class, tenant) = (job.seq, job.aged_at, job.priority, job.tenant);
        let (lanes, counters) = match (self.placement, job.engine) {
            (Placement::AtArrival, Some(e)) => (&mut self.own[e], &mut self.counters),
            _ => (&mut self.shared, &mut self.counters),
        };
        if arriving {
            lanes.push(id, class, tenant, rank, seq, aged_at, counters);
        } else {
            lanes.put_back(id, class, tenant, rank, seq, aged_at);
        }
    }

    /// Take `id` out of the queue a request routed to `engine` waits in.
    pub(super) fn remove(&mut self, id: u64, engine: Option<usize>) {
        self.lanes_mut(engine).remove(id);
    }

    /// The head of the queue a request routed to `engine` waits in.
    pub(super) fn first(&self, engine: Option<usize>) -> Option<u64> {
        self.lanes(engine).first(&self.counters)
    }

    /// Requests in the queue of `engine` whose guard has come go first from `now`.
    pub(super) fn promote(&mut self, engine: Option<usize>, now: f64) {
        self.lanes_mut(engine).promote(now);
    }
}
