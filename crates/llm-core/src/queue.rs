//! A waiting queue in a policy's order, with the starvation guard beside it: a request may carry
//! a time at which it has aged; from then on it goes before every request that has not, aged
//! ones in arrival order. Every operation is a few ordered-map updates (O(log n)).

use crate::order::Rank;
use std::collections::BTreeMap;

/// A waiting request's place: its rank, then its arrival.
pub(crate) type Key = (Rank, u64);

#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Waiting requests by rank, then arrival: their ids.
    ranked: BTreeMap<Key, u64>,
    /// Per id, its key and its guard's time (to remove it).
    keys: BTreeMap<u64, (Key, Option<f64>)>,
    /// Requests with a guard that have not aged yet, by when they age (a time ordered as a
    /// rank is).
    aging: BTreeMap<(Rank, u64), Key>,
    /// Requests that have aged, by arrival.
    aged: BTreeMap<u64, Key>,
}

impl Queue {
    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.ranked.len()
    }

    /// Queue `id` at `rank` (arrival `seq`), aging at `aged_at`.
    pub fn push(&mut self, id: u64, rank: Rank, seq: u64, aged_at: Option<f64>) {
        self.remove(id);
        let key = (rank, seq);
        self.ranked.insert(key, id);
        self.keys.insert(id, (key, aged_at));
        if let Some(at) = aged_at {
            self.aging.insert((Rank::of(at), seq), key);
        }
    }

    /// Take `id` out; whether it was there.
    pub fn remove(&mut self, id: u64) -> bool {
        let Some((key, aged_at)) = self.keys.remove(&id) else {
            return false;
        };
        self.ranked.remove(&key);
        if let Some(at) = aged_at
            && self.aging.remove(&(Rank::of(at), key.1)).is_none()
        {
            self.aged.remove(&key.1);
        }
        true
    }

    /// Move everyone whose guard time has come by `now` among the aged.
    pub fn promote(&mut self, now: f64) {
        while let Some(entry) = self.aging.first_entry() {
            if entry.key().0 > Rank::of(now) {
                break;
            }
            let key = entry.remove();
            self.aged.insert(key.1, key);
        }
    }

    /// The latest arrival waiting, as (arrival, id) (a scan: for the rare displacement).
    pub fn newest(&self) -> Option<(u64, u64)> {
        self.keys.iter().map(|(&id, (key, _))| (key.1, id)).max()
    }

    /// The request served next (after [`Queue::promote`]): the first aged one, else the first
    /// by rank.
    pub fn first(&self) -> Option<u64> {
        let key = match self.aged.first_key_value() {
            Some((_, key)) => key,
            None => self.ranked.first_key_value()?.0,
        };
        self.ranked.get(key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aged_requests_go_first_in_arrival_order_then_the_rest_by_rank() {
        let mut q = Queue::default();
        q.push(10, Rank::of(900.0), 0, Some(1.0));
        q.push(11, Rank::of(1.0), 1, None);
        q.push(12, Rank::of(800.0), 2, Some(1.5));
        q.push(13, Rank::of(2.0), 3, Some(100.0));
        q.promote(2.0);
        let mut order = Vec::new();
        while let Some(id) = q.first() {
            order.push(id);
            assert!(q.remove(id));
        }
        assert_eq!(order, [10, 12, 11, 13]);
        assert!(q.len() == 0 && q.aging.is_empty() && q.aged.is_empty());
    }

    #[test]
    fn a_removed_request_leaves_every_index_and_a_repush_replaces_it() {
        let mut q = Queue::default();
        q.push(1, Rank::of(5.0), 0, Some(0.0));
        q.promote(1.0);
        assert!(q.remove(1));
        assert!(!q.remove(1));
        assert!(q.aged.is_empty() && q.keys.is_empty());
        q.push(2, Rank::of(5.0), 1, Some(3.0));
        q.push(2, Rank::of(1.0), 1, None);
        assert_eq!(q.len(), 1);
        assert!(q.aging.is_empty());
        assert_eq!(q.first(), Some(2));
    }
}
