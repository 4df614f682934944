//! Multi-level feedback queue: a new queue starts at the top level and sinks one level each
//! time it has used its level's allotment of device time ([`QueueView::service`]: time ready
//! and running), however often it went idle in between (OSTEP's rule 4, so a queue cannot stay
//! on top by pausing just before its allotment ends). On each device the ready queues of the
//! highest level run (several at one level share the device); lower levels are suspended. Every
//! [`BOOST_EVERY`] all queues return to the top, so a sunk queue is never starved for long.
//!
//! What it is for: latency-sensitive work of unknown size beside long jobs, with no hints at
//! all. Short or intermittent queues stay near the top; long-running ones sink below them.

use super::contract::{Policy, PolicyEntry, Scope, serve_lowest_rank};
use crate::ids::{DeviceId, QueueId};
use crate::view::QueueView;
use crate::time::Nanos;
use std::collections::HashMap;

/// Levels; the last has no allotment (a queue stays there until the next boost).
pub const LEVELS: u8 = 4;

/// Device time a queue may use at the top level before it sinks; doubles per level.
pub const TOP_ALLOTMENT: Nanos = Nanos::from_ms(10);

/// How often every queue returns to the top level.
pub const BOOST_EVERY: Nanos = Nanos::from_ms(1000);

#[derive(Debug, Clone, Copy)]
struct Place {
    level: u8,
    /// The queue's service when it entered its level.
    entered_at_service: Nanos,
}

pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "mlfq",
    argument: None,
    build: |_| Ok(Box::new(Mlfq::default())),
}];

/// The MLFQ policy, per device.
#[derive(Debug, Default)]
pub struct Mlfq {
    places: HashMap<QueueId, Place>,
    scratch: Vec<(DeviceId, u8)>,
    next_boost: Option<Nanos>,
    next: Option<Nanos>,
}

/// The device time a queue may use at `level` before it sinks (`None`: the bottom level).
fn allotment(level: u8) -> Option<Nanos> {
    (level + 1 < LEVELS).then(|| Nanos(TOP_ALLOTMENT.0 << level))
}

impl Policy for Mlfq {
    fn name(&self) -> &'static str {
        "mlfq"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        let boost = self.next_boost.is_some_and(|b| now >= b);
        if boost || self.next_boost.is_none() {
            self.next_boost = Some(now.saturating_add(BOOST_EVERY));
        }
        for q in queues {
            let place = self.places.entry(q.id).or_insert(Place {
                level: 0,
                entered_at_service: q.service,
            });
            if boost {
                *place = Place {
                    level: 0,
                    entered_at_service: q.service,
                };
            }
            while let Some(a) = allotment(place.level) {
                let used = q.service.saturating_sub(place.entered_at_service);
                if used < a {
                    break;
                }
                place.level += 1;
                place.entered_at_service = place.entered_at_service.saturating_add(a);
            }
        }
        if self.places.len() > 2 * queues.len() + 16 {
            self.places
                .retain(|id, _| queues.iter().any(|q| q.id == *id));
        }
        let places = &self.places;
        serve_lowest_rank(queues, run, Scope::PerDevice, &mut self.scratch, |q| {
            places.get(&q.id).map_or(0, |p| p.level)
        });
        // Decide again when a running, ready queue would use up its allotment, or at the boost
        // if some queue has sunk (an idle scheduler with everyone on top sleeps).
        let sunk = self.places.values().any(|p| p.level > 0);
        self.next = self.next_boost.filter(|_| sunk);
        for (q, r) in queues.iter().zip(run.iter()) {
            if !(*r && q.ready) {
                continue;
            }
            let Some(p) = self.places.get(&q.id) else {
                continue;
            };
            if let Some(a) = allotment(p.level) {
                let left = a.saturating_sub(q.service.saturating_sub(p.entered_at_service));
                let at = now.saturating_add(left.max(Nanos(1)));
                self.next = Some(self.next.map_or(at, |t| t.min(at)));
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{decide, view};
    use super::*;

    impl Mlfq {
        fn level(&self, id: QueueId) -> u8 {
            self.places.get(&id).map_or(0, |p| p.level)
        }
    }

    #[test]
    fn queues_start_on_top_and_sink_as_they_use_the_device() {
        let mut p = Mlfq::default();
        let mut qs = [view(0, 0, 0, true), view(1, 0, 0, true)];
        assert_eq!(decide(&mut p, Nanos::ZERO, &qs), vec![true, true]);
        // Queue 0 used its top allotment: it sinks below the newcomer.
        qs[0].service = TOP_ALLOTMENT;
        assert_eq!(decide(&mut p, Nanos::from_ms(10), &qs), vec![false, true]);
        assert_eq!(p.level(qs[0].id), 1);
        // Its second allotment (20 ms) spent in several bursts still counts in full.
        qs[0].service = TOP_ALLOTMENT + Nanos::from_ms(20);
        qs[1].ready = false;
        decide(&mut p, Nanos::from_ms(40), &qs);
        assert_eq!(p.level(qs[0].id), 2);
        // The bottom level has no allotment.
        qs[0].service = Nanos::from_ms(10_000);
        decide(&mut p, Nanos::from_ms(100), &qs);
        assert_eq!(p.level(qs[0].id), LEVELS - 1);
    }

    #[test]
    fn the_boost_returns_everybody_to_the_top() {
        let mut p = Mlfq::default();
        let mut qs = [view(0, 0, 0, true), view(1, 0, 0, true)];
        decide(&mut p, Nanos::ZERO, &qs);
        qs[0].service = Nanos::from_ms(500);
        assert_eq!(decide(&mut p, Nanos::from_ms(500), &qs), vec![false, true]);
        assert_eq!(
            p.next_timer(),
            Some(Nanos::from_ms(510)),
            "queue 1's allotment"
        );
        assert_eq!(
            decide(&mut p, BOOST_EVERY, &qs),
            vec![true, true],
            "boosted: both on top"
        );
        assert_eq!(p.level(qs[0].id), 0);
    }
}
