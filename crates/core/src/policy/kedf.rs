//! k-earliest-deadline-first: per device, the k ready queues with the earliest absolute
//! deadlines (ready time + relative deadline hint) run; queues without a deadline come last.

use super::contract::{Policy, PolicyEntry};
use crate::ids::DeviceId;
use crate::view::QueueView;
use crate::time::Nanos;

/// `kedf` runs the earliest deadline on each device; `kedf:K` the K earliest.
pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "kedf",
    argument: Some("K"),
    build: |arg| match arg.map(str::parse::<usize>) {
        None => Ok(Box::new(KEarliestDeadline::new(1))),
        Some(Ok(k)) if k >= 1 => Ok(Box::new(KEarliestDeadline::new(k))),
        Some(_) => Err("takes a count K >= 1 (`kedf:2`)"),
    },
}];

/// k-EDF, per device.
#[derive(Debug)]
pub struct KEarliestDeadline {
    k: usize,
    order: Vec<(DeviceId, Nanos, usize)>,
}

impl KEarliestDeadline {
    /// Let the `k` earliest deadlines on each device run (`k >= 1`).
    pub fn new(k: usize) -> KEarliestDeadline {
        KEarliestDeadline {
            k: k.max(1),
            order: Vec::new(),
        }
    }
}

impl Policy for KEarliestDeadline {
    fn name(&self) -> &'static str {
        "kedf"
    }

    fn schedule(&mut self, _now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.order.clear();
        for (i, q) in queues.iter().enumerate().filter(|(_, q)| q.ready) {
            let deadline = q
                .hints
                .deadline
                .map_or(Nanos::MAX, |d| q.ready_since.saturating_add(d));
            self.order.push((q.device, deadline, i));
        }
        self.order.sort_unstable();
        let mut taken = 0;
        let mut device = None;
        for &(d, _, i) in &self.order {
            if device != Some(d) {
                device = Some(d);
                taken = 0;
            }
            run[i] = taken < self.k;
            taken += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{decide, view};
    use super::*;

    #[test]
    fn earliest_k_run() {
        let mut qs = [
            view(0, 0, 0, true),
            view(1, 0, 0, true),
            view(2, 0, 0, true),
            view(3, 1, 0, true),
        ];
        qs[0].hints.deadline = Some(Nanos::from_ms(30));
        qs[1].hints.deadline = Some(Nanos::from_ms(10));
        qs[2].hints.deadline = None;
        qs[3].hints.deadline = Some(Nanos::from_ms(99));
        let mut one = KEarliestDeadline::new(1);
        assert_eq!(
            decide(&mut one, Nanos::ZERO, &qs),
            vec![false, true, false, true]
        );
        let mut two = KEarliestDeadline::new(2);
        assert_eq!(
            decide(&mut two, Nanos::ZERO, &qs),
            vec![true, true, false, true]
        );
    }
}
