//! Highest priority first: per device (XSched's fixed-priority policy), and across devices.
//!
//! The global variant suspends lower-priority queues on *every* device while a higher-priority
//! queue has work anywhere. That is what a pipeline spanning devices needs: when its next stage
//! reaches the second device, that device is already clear instead of first draining background
//! work (the multi-device experiment of the XSched paper).

use super::contract::{Policy, PolicyEntry, Scope, serve_lowest_rank};
use crate::ids::DeviceId;
use crate::view::QueueView;
use crate::time::Nanos;
use std::cmp::Reverse;

/// `hpf` itself is the row of `starvation.rs`, which adds its `min-share=F` form.
pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "hpf-global",
    argument: None,
    build: |_| Ok(Box::new(HpfGlobal::default())),
}];

/// Fixed priority, compared among queues of the same device.
#[derive(Debug, Default)]
pub struct Hpf {
    scratch: Vec<(DeviceId, Reverse<i32>)>,
    tops: Vec<Top>,
}

impl Policy for Hpf {
    fn name(&self) -> &'static str {
        "hpf"
    }

    fn protectable(&mut self, queues: &[QueueView], protect: &mut [bool]) {
        mark_strict_top(queues, protect, Scope::PerDevice, &mut self.tops);
    }

    fn schedule(&mut self, _now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        serve_lowest_rank(queues, run, Scope::PerDevice, &mut self.scratch, |q| {
            Reverse(q.hints.priority)
        });
    }
}

/// The highest priority registered in a scope, and how many queues have it.
#[derive(Debug, Clone, Copy)]
struct Top {
    scope: DeviceId,
    priority: i32,
    holders: u32,
}

/// Mark the queues that alone hold the highest priority of their scope, ready or not: no queue
/// can ever preempt them under fixed priority while priorities stay as they are.
fn mark_strict_top(queues: &[QueueView], protect: &mut [bool], scope: Scope, tops: &mut Vec<Top>) {
    tops.clear();
    let key = |q: &QueueView| match scope {
        Scope::PerDevice => q.device,
        Scope::Global => DeviceId(0),
    };
    for q in queues {
        let (k, p) = (key(q), q.hints.priority);
        match tops.iter_mut().find(|t| t.scope == k) {
            Some(t) if p > t.priority => {
                *t = Top {
                    scope: k,
                    priority: p,
                    holders: 1,
                }
            }
            Some(t) if p == t.priority => t.holders += 1,
            Some(_) => {}
            None => tops.push(Top {
                scope: k,
                priority: p,
                holders: 1,
            }),
        }
    }
    for (q, protect) in queues.iter().zip(protect.iter_mut()) {
        let k = key(q);
        *protect = tops
            .iter()
            .any(|t| t.scope == k && t.priority == q.hints.priority && t.holders == 1);
    }
}

/// Fixed priority, compared across all devices.
#[derive(Debug, Default)]
pub struct HpfGlobal {
    tops: Vec<Top>,
}

impl Policy for HpfGlobal {
    fn name(&self) -> &'static str {
        "hpf-global"
    }

    fn protectable(&mut self, queues: &[QueueView], protect: &mut [bool]) {
        mark_strict_top(queues, protect, Scope::Global, &mut self.tops);
    }

    fn schedule(&mut self, _now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        let top = queues
            .iter()
            .filter(|q| q.ready)
            .map(|q| q.hints.priority)
            .max();
        if let Some(top) = top {
            for (q, run) in queues.iter().zip(run.iter_mut()) {
                *run = q.hints.priority >= top;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{decide, view};
    use super::*;

    #[test]
    fn per_device_only_competes_locally() {
        let qs = [
            view(0, 0, 10, true),
            view(1, 0, 1, true),
            view(2, 1, 1, true),
            view(3, 0, 0, false),
        ];
        assert_eq!(
            decide(&mut Hpf::default(), Nanos::ZERO, &qs),
            vec![true, false, true, false]
        );
    }

    #[test]
    fn equal_priorities_share() {
        let qs = [view(0, 0, 3, true), view(1, 0, 3, true)];
        assert_eq!(
            decide(&mut Hpf::default(), Nanos::ZERO, &qs),
            vec![true, true]
        );
    }

    #[test]
    fn idle_high_priority_suspends_nobody() {
        let qs = [view(0, 0, 10, false), view(1, 0, 1, true)];
        assert_eq!(
            decide(&mut Hpf::default(), Nanos::ZERO, &qs),
            vec![true, true]
        );
    }

    #[test]
    fn global_suspends_across_devices() {
        let qs = [
            view(0, 0, 10, true),
            view(1, 1, 1, true),
            view(2, 1, 10, false),
        ];
        assert_eq!(
            decide(&mut HpfGlobal::default(), Nanos::ZERO, &qs),
            vec![true, false, true]
        );
    }
}
