//! CFS-like weighted fair share: every queue accrues *virtual device time* (the service the
//! scheduler measured, [`QueueView::service`], divided by its `Share` weight), and on each
//! device the ready queue with the least of it runs. The running queue keeps the device until
//! its virtual time passes the next queue's by a granularity (the queue's `TimeSlice` hint, else
//! [`DEFAULT_GRANULARITY`]), so switches are bounded in number; a queue that wakes from idle
//! starts no further behind the busiest than one granularity (Linux's gentle sleeper credit),
//! so it gets the device at once without banking what it missed.
//!
//! Unlike `bandwidth` (fixed slices, a waking queue waits for the running slice and gets no
//! credit), a queue that is often idle here preempts a long-running one of equal weight as soon
//! as it has work: weighted fairness over time with low latency for intermittent work.

use super::contract::{Policy, PolicyEntry};
use super::vtime::VirtualTimes;
use crate::ids::{DeviceId, QueueId};
use crate::view::QueueView;
use crate::time::Nanos;
use std::collections::HashMap;

/// How far (in virtual time) the running queue may get ahead before it yields.
pub const DEFAULT_GRANULARITY: Nanos = Nanos::from_ms(4);

pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "cfs",
    argument: None,
    build: |_| Ok(Box::new(Cfs::default())),
}];

/// The CFS-like policy.
#[derive(Debug, Default)]
pub struct Cfs {
    vtimes: VirtualTimes,
    /// The service already charged, per queue.
    charged: HashMap<QueueId, Nanos>,
    /// Per device, the queue that holds it.
    holders: Vec<(DeviceId, QueueId)>,
    next: Option<Nanos>,
}

fn weight(q: &QueueView) -> f64 {
    f64::from(q.hints.share.max(1))
}

fn granularity(q: &QueueView) -> f64 {
    q.hints.time_slice.unwrap_or(DEFAULT_GRANULARITY).0 as f64
}

impl Cfs {
    fn vtime(&self, id: QueueId) -> f64 {
        self.vtimes.of(id)
    }

    /// Charge what each queue used since the last decision, and place queues that just woke
    /// no further behind the least-served busy queue than one granularity.
    fn charge(&mut self, queues: &[QueueView]) {
        for q in queues {
            let charged = self.charged.entry(q.id).or_default();
            let used = q.service.saturating_sub(*charged);
            *charged = q.service;
            self.vtimes.charge(q.id, used.0 as f64, weight(q));
        }
        self.vtimes
            .admit_newly_ready(queues, |q| granularity(q) / weight(q));
        if self.charged.len() > 2 * queues.len() + 16 {
            self.charged
                .retain(|id, _| queues.iter().any(|q| q.id == *id));
        }
    }
}

impl Policy for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.charge(queues);
        self.next = None;
        self.holders
            .retain(|(_, h)| queues.iter().any(|q| q.id == *h && q.ready));
        for q in queues.iter().filter(|q| q.ready) {
            let d = q.device;
            if self.holders.iter().any(|(hd, _)| *hd == d) {
                continue;
            }
            let least = queues
                .iter()
                .filter(|o| o.ready && o.device == d)
                .min_by(|a, b| {
                    self.vtime(a.id)
                        .total_cmp(&self.vtime(b.id))
                        .then(a.id.cmp(&b.id))
                });
            if let Some(least) = least {
                self.holders.push((d, least.id));
            }
        }
        // A holder yields once it is a granularity ahead of the least-served other ready queue;
        // the timer fires when the (new) holder gets that far ahead.
        for slot in 0..self.holders.len() {
            let (d, mut h) = self.holders[slot];
            for _ in 0..queues.len() {
                let Some(rival) = self.least_other(queues, d, h) else {
                    break;
                };
                let (lead, allowed) = self.lead(queues, h, rival);
                if lead < allowed {
                    let holder_weight = queues.iter().find(|q| q.id == h).map_or(1.0, weight);
                    self.arm(now, (allowed - lead) * holder_weight);
                    break;
                }
                h = rival;
            }
            self.holders[slot] = (d, h);
        }
        for (q, run) in queues.iter().zip(run.iter_mut()) {
            if let Some((_, h)) = self.holders.iter().find(|(d, _)| *d == q.device) {
                *run = *h == q.id;
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next
    }
}

impl Cfs {
    /// The least-served ready queue on device `d` other than `h`.
    fn least_other(&self, queues: &[QueueView], d: DeviceId, h: QueueId) -> Option<QueueId> {
        queues
            .iter()
            .filter(|o| o.ready && o.device == d && o.id != h)
            .min_by(|a, b| {
                self.vtime(a.id)
                    .total_cmp(&self.vtime(b.id))
                    .then(a.id.cmp(&b.id))
            })
            .map(|o| o.id)
    }

    /// How far `h` is ahead of `rival` in virtual time, and how far it may get.
    fn lead(&self, queues: &[QueueView], h: QueueId, rival: QueueId) -> (f64, f64) {
        let allowed = queues
            .iter()
            .find(|q| q.id == h)
            .map_or(0.0, |q| granularity(q) / weight(q));
        (self.vtime(h) - self.vtime(rival), allowed)
    }

    /// Ask to decide again after `after_ns` of device time (at least 1 ns from now).
    fn arm(&mut self, now: Nanos, after_ns: f64) {
        let at = now.saturating_add(Nanos(after_ns.max(1.0).ceil() as u64));
        self.next = Some(self.next.map_or(at, |t| t.min(at)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::view;
    use super::*;

    /// Drive the policy as the scheduler would: charge the holder the time between decisions.
    fn run_for(p: &mut Cfs, qs: &mut [QueueView], until: Nanos) -> Vec<u64> {
        let mut now = Nanos::ZERO;
        let mut held = vec![0u64; qs.len()];
        let mut run = vec![true; qs.len()];
        while now < until {
            run.fill(true);
            p.schedule(now, qs, &mut run);
            let next = p.next_timer().unwrap_or(until).min(until);
            let dt = next.saturating_sub(now);
            for (q, r) in qs.iter_mut().zip(&run) {
                if *r && q.ready {
                    q.service += dt;
                }
            }
            if let Some(i) = run.iter().position(|r| *r) {
                held[i] += dt.0;
            }
            now = next;
        }
        held
    }

    #[test]
    fn device_time_follows_the_weights() {
        let mut qs = [view(0, 0, 0, true), view(1, 0, 0, true)];
        qs[0].hints.share = 3;
        let held = run_for(&mut Cfs::default(), &mut qs, Nanos::from_ms(2000));
        let share = held[0] as f64 / (held[0] + held[1]) as f64;
        assert!((share - 0.75).abs() < 0.01, "share {share}");
    }

    #[test]
    fn a_waking_queue_takes_the_device_at_once_but_banks_no_credit() {
        let mut qs = [view(0, 0, 0, true), view(1, 0, 0, false)];
        let mut p = Cfs::default();
        run_for(&mut p, &mut qs, Nanos::from_ms(100));
        qs[1].ready = true;
        let mut run = vec![true; 2];
        p.schedule(Nanos::from_ms(100), &qs, &mut run);
        assert_eq!(run, vec![false, true], "the sleeper runs first");
        let lead = p.vtime(qs[0].id) - p.vtime(qs[1].id);
        assert!(
            (lead - DEFAULT_GRANULARITY.0 as f64).abs() < 1.0,
            "credit of one granularity, not 100 ms: {lead}"
        );
    }
}
