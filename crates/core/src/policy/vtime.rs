//! Virtual time: device time received divided by share weight, per queue, for the share
//! policies (`bandwidth`, `cfs`). Both place a queue that wakes from idle relative to the
//! least-served queue that was busy on its device, so an idle queue cannot bank credit; they
//! differ in how much head start (if any) it gets.

use crate::ids::QueueId;
use crate::view::QueueView;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, Default)]
struct Account {
    /// Device time received divided by share weight, in nanoseconds.
    vtime: f64,
    /// Whether the queue was ready at the last decision.
    ready: bool,
}

/// Every queue's virtual time.
#[derive(Debug, Default)]
pub(crate) struct VirtualTimes {
    accounts: HashMap<QueueId, Account>,
}

impl VirtualTimes {
    /// A queue's virtual time (0 for one never seen).
    pub(crate) fn of(&self, id: QueueId) -> f64 {
        self.accounts.get(&id).map_or(0.0, |a| a.vtime)
    }

    /// Add `ns / weight` to a queue's virtual time.
    pub(crate) fn charge(&mut self, id: QueueId, ns: f64, weight: f64) {
        self.accounts.entry(id).or_default().vtime += ns / weight.max(1.0);
    }

    /// Place every queue that became ready since the last call: at least the least virtual
    /// time among the queues on its device that were ready then, less `credit(queue)`. Then
    /// remember who is ready, and forget queues that left.
    pub(crate) fn admit_newly_ready(
        &mut self,
        queues: &[QueueView],
        credit: impl Fn(&QueueView) -> f64,
    ) {
        for q in queues {
            let floor = queues
                .iter()
                .filter(|o| o.device == q.device && o.id != q.id)
                .filter_map(|o| self.accounts.get(&o.id).filter(|a| a.ready))
                .map(|a| a.vtime)
                .fold(f64::INFINITY, f64::min);
            let a = self.accounts.entry(q.id).or_default();
            let least = floor - credit(q);
            if q.ready && !a.ready && floor.is_finite() && a.vtime < least {
                a.vtime = least;
            }
        }
        for q in queues {
            if let Some(a) = self.accounts.get_mut(&q.id) {
                a.ready = q.ready;
            }
        }
        if self.accounts.len() > 2 * queues.len() + 16 {
            self.accounts
                .retain(|id, _| queues.iter().any(|q| q.id == *id));
        }
    }
}
