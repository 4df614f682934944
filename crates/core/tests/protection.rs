//! Protection (`Operation::Protect`) keeps Level 1's preemption bound with any number of
//! priorities: whatever is protected, the highest-priority ready queue never finds more than a
//! threshold's worth of any other queue's commands ahead of it in the hardware queue.
//!
//! The harness runs launch machines and the scheduler together on one device whose hardware
//! queue runs commands in launch order (Level 1: a suspend stops launching and the commands
//! already launched drain). Priorities are fixed during a run: the invariant is stated for the
//! queues as they are (a new queue or a priority hint above a protected queue can still find
//! its backlog in flight).

use proptest::prelude::*;
use std::collections::VecDeque;
use xsched_core::PolicySpec;
use xsched_core::policy::{Hpf, Policy};
use xsched_core::{
    CommandId, CommandMeta, DeviceId, LaunchConfig, LaunchMachine, Level, Nanos, Operation,
    QueueEvent, QueueHints, QueueId, QueueScheduler, QueueView,
};

const THRESHOLD: u32 = 3;

#[derive(Clone, Debug)]
enum Step {
    Submit(usize, u8),
    Launch,
    DeviceRuns(u8),
    Observe,
}

struct Queue {
    priority: i32,
    machine: LaunchMachine,
    /// Launched, not yet observed: each with its synchronization flag.
    launched: VecDeque<(CommandId, bool)>,
}

struct Harness {
    sched: QueueScheduler,
    queues: Vec<Queue>,
    /// The hardware queue: (queue, command) in launch order.
    hw: VecDeque<(usize, CommandId)>,
    /// Highest command done on the device, per queue.
    done: Vec<Option<CommandId>>,
    now: Nanos,
}

impl Harness {
    fn new(policy: Box<dyn Policy>, priorities: &[i32]) -> Harness {
        let mut sched = QueueScheduler::new(policy);
        let config = LaunchConfig::new(THRESHOLD, 1).expect("valid");
        let queues = priorities
            .iter()
            .enumerate()
            .map(|(i, &priority)| {
                let hints = QueueHints {
                    priority,
                    ..QueueHints::default()
                };
                sched
                    .handle_event(
                        Nanos::ZERO,
                        QueueEvent::Register {
                            queue: QueueId(i as u32),
                            device: DeviceId(0),
                            hints,
                        },
                    )
                    .expect("fresh queue");
                Queue {
                    priority,
                    machine: LaunchMachine::new(config, Level::Block),
                    launched: VecDeque::new(),
                }
            })
            .collect();
        Harness {
            sched,
            queues,
            hw: VecDeque::new(),
            done: vec![None; priorities.len()],
            now: Nanos::ZERO,
        }
    }

    fn event(&mut self, e: QueueEvent) {
        self.sched.handle_event(self.now, e).expect("registered");
    }

    /// Apply every decision at once (Level 1: no hardware action to wait for).
    fn apply(&mut self) {
        while let Some(op) = self.sched.poll_operation() {
            let m = &mut self.queues[op.queue().0 as usize].machine;
            let action = match op {
                Operation::Suspend(_) => m.suspend(),
                Operation::Resume(_) => m.resume(),
                Operation::Protect(_) | Operation::Unprotect(_) => {
                    m.set_protected(matches!(op, Operation::Protect(_)));
                    continue;
                }
            };
            assert_eq!(action, xsched_core::HwAction::Nothing, "Level 1");
        }
    }

    fn step(&mut self, s: &Step) {
        self.now += Nanos::from_us(10);
        match *s {
            Step::Submit(q, n) => {
                for _ in 0..n {
                    let meta = CommandMeta::with_estimate(Nanos::from_us(100));
                    let (_, was_idle) = self.queues[q].machine.submit(meta);
                    if was_idle {
                        self.event(QueueEvent::Ready(QueueId(q as u32)));
                    }
                }
            }
            Step::Launch => {
                for (i, q) in self.queues.iter_mut().enumerate() {
                    while let Some(l) = q.machine.poll_launch(self.now) {
                        self.hw.push_back((i, l.cmd));
                        q.launched.push_back((l.cmd, l.sync));
                    }
                }
            }
            Step::DeviceRuns(n) => {
                for _ in 0..n {
                    if let Some((q, cmd)) = self.hw.pop_front() {
                        self.done[q] = Some(cmd);
                    }
                }
            }
            Step::Observe => {
                for i in 0..self.queues.len() {
                    self.observe(i);
                }
            }
        }
        self.apply();
    }

    fn observe(&mut self, i: usize) {
        loop {
            let q = &mut self.queues[i];
            let Some(&(target, _)) = q.launched.iter().find(|(_, sync)| *sync) else {
                return;
            };
            if self.done[i].is_none_or(|d| d < target) {
                return;
            }
            let synced = q.machine.on_synced(target, self.now).expect("in flight");
            q.launched.retain(|(c, _)| *c > synced.last);
            if synced.now_idle {
                self.event(QueueEvent::Idle(QueueId(i as u32)));
            }
        }
    }

    /// The bound: the highest-priority ready queue (a strict top among ready queues) finds at
    /// most `THRESHOLD` commands of each other queue in flight ahead of it.
    fn check(&self) -> Result<(), String> {
        let ready: Vec<(usize, i32)> = self
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.machine.is_idle())
            .map(|(i, q)| (i, q.priority))
            .collect();
        let Some(&(top, p)) = ready.iter().max_by_key(|(_, p)| *p) else {
            return Ok(());
        };
        if ready.iter().any(|&(i, op)| i != top && op == p) {
            return Ok(());
        }
        for (i, q) in self.queues.iter().enumerate().filter(|(i, _)| *i != top) {
            if q.machine.in_flight() > THRESHOLD as usize {
                return Err(format!(
                    "queue {top} (priority {p}) is ready behind {} commands of queue {i} \
                     (priority {}), over the threshold {THRESHOLD}",
                    q.machine.in_flight(),
                    q.priority
                ));
            }
        }
        Ok(())
    }
}

/// Run `steps` under `policy`, checking the bound after each.
fn run(policy: Box<dyn Policy>, priorities: &[i32], steps: &[Step]) -> Result<(), String> {
    let mut h = Harness::new(policy, priorities);
    for s in steps {
        h.step(s);
        h.check()?;
    }
    Ok(())
}

fn step(queues: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..queues, 1u8..8).prop_map(|(q, n)| Step::Submit(q, n)),
        Just(Step::Launch),
        (1u8..6).prop_map(Step::DeviceRuns),
        Just(Step::Observe),
    ]
}

fn case() -> impl Strategy<Value = (Vec<i32>, Vec<Step>)> {
    // Three to five queues with at least three distinct priorities.
    (3usize..=5).prop_flat_map(|n| {
        (
            proptest::collection::vec(-2i32..3, n).prop_filter("three or more priorities", |p| {
                let mut d = p.clone();
                d.sort_unstable();
                d.dedup();
                d.len() >= 3
            }),
            proptest::collection::vec(step(n), 1..120),
        )
    })
}

proptest! {
    #[test]
    fn the_highest_ready_queue_waits_at_most_a_threshold_of_each_other((prios, steps) in case()) {
        for name in ["hpf", "hpf-global"] {
            let policy = PolicySpec::registered(name).build();
            if let Err(e) = run(policy, &prios, &steps) {
                return Err(TestCaseError::fail(format!("{name}: {e}")));
            }
        }
    }
}

/// The old rule: protect whichever queue runs while others are suspended.
struct EveryWinner(Hpf);

impl Policy for EveryWinner {
    fn name(&self) -> &'static str {
        "hpf-protecting-every-winner"
    }

    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        self.0.schedule(now, queues, run);
    }

    fn protectable(&mut self, _queues: &[QueueView], protect: &mut [bool]) {
        protect.fill(true);
    }
}

#[test]
fn protecting_the_middle_queue_past_its_bound_fails_the_check() {
    // Low runs; middle arrives (low is suspended for it); high arrives.
    let steps = [
        Step::Submit(0, 6),
        Step::Launch,
        Step::Submit(1, 7),
        Step::Launch,
        Step::Submit(2, 1),
    ];
    let prios = [0, 5, 10];
    assert_eq!(run(Box::new(Hpf::default()), &prios, &steps), Ok(()));
    let err = run(Box::new(EveryWinner(Hpf::default())), &prios, &steps)
        .expect_err("the mutated rule launches the middle queue's whole backlog");
    assert!(err.contains("7 commands of queue 1"), "{err}");
}
