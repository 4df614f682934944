//! A starvation guard for fixed priority (`hpf:min-share=F`): under plain `hpf` a queue below a
//! busy higher-priority one never runs; with the guard every ready queue is let run for at least
//! the share F of each [`WINDOW`], at the higher ones' expense. It is off by default. The device
//! time that buys is about F, not at least F: what the queue launches in its turn, less what the
//! higher queue still had in flight (the simulator's test checks a band around F).
//!
//! The rule is a latest start: in each window a queue is owed `F × WINDOW` of running time (its
//! [`QueueView::service`], the time it was ready and allowed to run). A ready queue that fixed
//! priority suspends and that has not had its due runs, alone on its device, once the window
//! has only its remaining due left; then fixed priority takes over again. A queue that was idle
//! part of the window is owed no more than the window has left, so it cannot bank time.

use super::contract::{Policy, PolicyEntry};
use super::hold::Held;
use super::hpf::Hpf;
use crate::ids::QueueId;
use crate::view::QueueView;
use crate::time::Nanos;

/// The window over which each queue's minimum share is kept.
pub const WINDOW: Nanos = Nanos::from_ms(100);

/// `hpf`, plain, with its starvation guard (`hpf:min-share=F`) or with a hold-down
/// (`hpf:hold=MS`, `hold.rs`).
pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "hpf",
    argument: Some("min-share=F | hold=MS"),
    build: |arg| match arg {
        None => Ok(Box::new(Hpf::default())),
        Some(arg) => match arg.strip_prefix("hold=") {
            Some(ms) => ms
                .parse::<f64>()
                .ok()
                .filter(|ms| ms.is_finite() && *ms > 0.0)
                .and_then(|ms| Held::new(Hpf::default(), Nanos((ms * 1e6) as u64)))
                .map(|h| Box::new(h) as Box<dyn Policy>)
                .ok_or("takes `hold=MS` with 0 < MS <= 1000 (milliseconds)"),
            None => arg
                .strip_prefix("min-share=")
                .and_then(|f| f.parse::<f64>().ok())
                .and_then(Guarded::new)
                .map(|g| Box::new(g) as Box<dyn Policy>)
                .ok_or("takes `min-share=F` with 0 < F <= 0.5, or `hold=MS`"),
        },
    },
}];

/// Fixed priority with a minimum share for every ready queue.
#[derive(Debug)]
pub struct Guarded {
    hpf: Hpf,
    share: f64,
    window_start: Option<Nanos>,
    /// Each queue's service at the start of the window.
    base: Vec<(QueueId, Nanos)>,
    /// Queues given the device this decision (kept to avoid allocating).
    starving: Vec<usize>,
    next: Option<Nanos>,
}

impl Guarded {
    /// `hpf` with the minimum share `share`; `None` unless `0 < share <= 0.5` (a guard above
    /// half would turn priorities around).
    pub fn new(share: f64) -> Option<Guarded> {
        (share > 0.0 && share <= 0.5).then(|| Guarded {
            hpf: Hpf::default(),
            share,
            window_start: None,
            base: Vec::new(),
            starving: Vec::new(),
            next: None,
        })
    }

    fn roll(&mut self, now: Nanos, queues: &[QueueView]) -> Nanos {
        let start = match self.window_start {
            Some(s) if now < s + WINDOW => s,
            Some(s) => s + Nanos((now.saturating_sub(s).0 / WINDOW.0) * WINDOW.0),
            None => now,
        };
        if self.window_start != Some(start) {
            self.window_start = Some(start);
            self.base.clear();
            self.base.extend(queues.iter().map(|q| (q.id, q.service)));
        }
        for q in queues {
            if !self.base.iter().any(|(id, _)| *id == q.id) {
                self.base.push((q.id, q.service));
            }
        }
        start + WINDOW
    }
}

impl Policy for Guarded {
    fn name(&self) -> &'static str {
        "hpf"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.hpf.schedule(now, queues, run);
        let end = self.roll(now, queues);
        let due = Nanos((WINDOW.0 as f64 * self.share) as u64);
        let mut next = end;
        self.starving.clear();
        for (i, q) in queues.iter().enumerate() {
            if !q.ready || run[i] {
                continue;
            }
            let base = self
                .base
                .iter()
                .find(|(id, _)| *id == q.id)
                .map_or(q.service, |(_, s)| *s);
            let owed = due.saturating_sub(q.service.saturating_sub(base));
            if owed == Nanos::ZERO {
                continue;
            }
            let latest = end.saturating_sub(owed);
            if now >= latest {
                self.starving.push(i);
            } else {
                next = next.min(latest);
            }
        }
        for &i in &self.starving {
            let device = queues[i].device;
            for (j, q) in queues.iter().enumerate() {
                if q.device == device {
                    run[j] = self.starving.contains(&j);
                }
            }
        }
        self.next = Some(next);
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_util::view;

    fn at(ms: u64) -> Nanos {
        Nanos::from_ms(ms)
    }

    #[test]
    fn a_starved_queue_runs_for_its_share_at_the_latest_start_and_not_before() {
        let mut p = Guarded::new(0.1).expect("a valid share");
        let mut qs = [view(0, 0, 5, true), view(1, 0, 0, true)];
        let mut decide = |t: Nanos, qs: &[QueueView]| {
            let mut run = vec![true; 2];
            p.schedule(t, qs, &mut run);
            (run, p.next_timer())
        };
        assert_eq!(decide(at(0), &qs), (vec![true, false], Some(at(90))));
        assert_eq!(decide(at(50), &qs).0, vec![true, false]);
        // Ten milliseconds before the window ends the low queue has had none of its 10 ms.
        assert_eq!(decide(at(90), &qs), (vec![false, true], Some(at(100))));
        // A new window: fixed priority again, the guard due again at 190 ms.
        qs[1].service = at(10);
        qs[0].service = at(90);
        assert_eq!(decide(at(100), &qs), (vec![true, false], Some(at(190))));
    }

    #[test]
    fn a_queue_that_had_its_share_or_waits_on_another_device_is_left_to_priority() {
        let mut p = Guarded::new(0.2).expect("a valid share");
        let mut qs = [
            view(0, 0, 5, true),
            view(1, 0, 0, true),
            view(2, 1, 0, true),
        ];
        let mut run = vec![true; 3];
        p.schedule(at(0), &qs, &mut run);
        // By 85 ms queue 1 ran 20 ms (its share): nothing to give it at the latest start.
        qs[1].service = at(20);
        let mut run = vec![true; 3];
        p.schedule(at(85), &qs, &mut run);
        assert_eq!(run, vec![true, false, true]);
        assert!(Guarded::new(0.0).is_none() && Guarded::new(0.6).is_none());
    }
}
