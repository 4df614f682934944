//! Property tests of the core's invariants: the XQueue launch machine and the HPF scheduler
//! (`protection.rs` checks the two together).

use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};
use xsched_core::PolicySpec;
use xsched_core::{
    CommandId, CommandMeta, DeviceId, Hint, LaunchConfig, LaunchMachine, Level, Nanos, Operation,
    QueueEvent, QueueHints, QueueId, QueueScheduler,
};

#[derive(Clone, Debug)]
enum Step {
    Submit(u8, u16),
    Launch,
    DeviceRuns(u8),
    Observe,
    Suspend,
    Resume,
    Reconfigure(u32, u32, Option<u16>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..6, 0u16..500).prop_map(|(n, est)| Step::Submit(n, est)),
        Just(Step::Launch),
        (1u8..5).prop_map(Step::DeviceRuns),
        Just(Step::Observe),
        Just(Step::Suspend),
        Just(Step::Resume),
        (1u32..10, 1u32..10, proptest::option::of(1u16..2000))
            .prop_map(|(t, b, budget)| { Step::Reconfigure(t.max(b), t.min(b), budget) }),
    ]
}

/// A driver around the machine: a hardware FIFO that completes in order, and the launcher's
/// view of what it observed.
struct Harness {
    m: LaunchMachine,
    hw: VecDeque<CommandId>,
    /// Launched, not yet observed: each with its synchronization flag.
    launched: VecDeque<(CommandId, bool)>,
    done_on_device: Vec<CommandId>,
    observed: Vec<CommandId>,
    submitted: u64,
    now: Nanos,
}

impl Harness {
    fn launch_all(&mut self) -> Result<(), TestCaseError> {
        let suspended = self.m.is_suspended();
        while let Some(l) = self.m.poll_launch(self.now) {
            prop_assert!(!suspended, "a suspended queue launched");
            prop_assert!(
                self.m.in_flight() as u32 <= self.m.config().threshold(),
                "in flight {} over threshold {}",
                self.m.in_flight(),
                self.m.config().threshold()
            );
            self.hw.push_back(l.cmd);
            self.launched.push_back((l.cmd, l.sync));
        }
        if !self.m.is_suspended() && self.m.in_flight() > 0 && !self.m.can_launch() {
            prop_assert!(
                self.wait_target().is_some(),
                "blocked with nothing to wait on"
            );
        }
        Ok(())
    }

    fn device_runs(&mut self, n: u8) {
        for _ in 0..n {
            if let Some(c) = self.hw.pop_front() {
                self.done_on_device.push(c);
            }
        }
        self.now += Nanos::from_us(100);
    }

    /// The oldest synchronization point in flight: what a blocked launcher waits on.
    fn wait_target(&self) -> Option<CommandId> {
        self.launched
            .iter()
            .find(|(_, sync)| *sync)
            .map(|(c, _)| *c)
    }

    fn observe(&mut self) -> Result<(), TestCaseError> {
        while let Some(t) = self.wait_target() {
            if !self.done_on_device.contains(&t) {
                break;
            }
            let s = self.m.on_synced(t, self.now).expect("target was in flight");
            for id in s.first.0..=s.last.0 {
                self.observed.push(CommandId(id));
            }
            self.launched.retain(|(c, _)| *c > s.last);
            prop_assert_eq!(s.now_idle, self.m.is_idle());
        }
        Ok(())
    }
}

proptest! {
    #[test]
    fn xqueue_completes_everything_once_in_order(steps in proptest::collection::vec(step(), 1..80)) {
        let mut h = Harness {
            m: LaunchMachine::new(LaunchConfig::new(4, 2).expect("valid"), Level::Block),
            hw: VecDeque::new(),
            launched: VecDeque::new(),
            done_on_device: Vec::new(),
            observed: Vec::new(),
            submitted: 0,
            now: Nanos::ZERO,
        };
        for s in steps {
            match s {
                Step::Submit(n, est) => for _ in 0..n {
                    let (id, _) = h.m.submit(CommandMeta::with_estimate(Nanos::from_us(u64::from(est))));
                    prop_assert_eq!(id.0, h.submitted);
                    h.submitted += 1;
                },
                Step::Launch => h.launch_all()?,
                Step::DeviceRuns(n) => h.device_runs(n),
                Step::Observe => h.observe()?,
                Step::Suspend => { let _hw = h.m.suspend(); }
                Step::Resume => { let _hw = h.m.resume(); }
                Step::Reconfigure(t, b, budget) => {
                    let cfg = LaunchConfig::new(t, b).expect("t >= b >= 1")
                        .with_inflight_budget(budget.map(|us| Nanos::from_us(u64::from(us))));
                    h.m.set_config(cfg);
                }
            }
        }
        // Resume and drain: nothing may be lost.
        let _hw = h.m.resume();
        let mut rounds = 0;
        while !h.m.is_idle() {
            h.launch_all()?;
            h.device_runs(u8::MAX);
            h.observe()?;
            rounds += 1;
            prop_assert!(rounds < 10_000, "drain did not finish");
        }
        let expected: Vec<CommandId> = (0..h.submitted).map(CommandId).collect();
        prop_assert_eq!(h.observed, expected);
    }
}

#[derive(Clone, Debug)]
enum SchedStep {
    Ready(u32),
    Idle(u32),
    Priority(u32, i32),
}

fn sched_step() -> impl Strategy<Value = SchedStep> {
    prop_oneof![
        (0u32..6).prop_map(SchedStep::Ready),
        (0u32..6).prop_map(SchedStep::Idle),
        (0u32..6, -3i32..4).prop_map(|(q, p)| SchedStep::Priority(q, p)),
    ]
}

proptest! {
    #[test]
    fn hpf_never_suspends_the_highest_ready_queue(
        prios in proptest::collection::vec(-3i32..4, 6),
        steps in proptest::collection::vec(sched_step(), 1..60),
    ) {
        let mut s = QueueScheduler::new(PolicySpec::default().build());
        let mut prio: HashMap<u32, i32> = HashMap::new();
        let mut ready: HashMap<u32, bool> = HashMap::new();
        let mut suspended: HashMap<u32, bool> = HashMap::new();
        let mut protected: HashMap<u32, bool> = HashMap::new();
        let device = |q: u32| DeviceId((q % 2) as u16);
        for (q, p) in prios.iter().enumerate() {
            let q = q as u32;
            let hints = QueueHints { priority: *p, ..QueueHints::default() };
            s.handle_event(Nanos::ZERO, QueueEvent::Register { queue: QueueId(q), device: device(q), hints })
                .expect("fresh queue");
            prio.insert(q, *p);
        }
        for (t, st) in steps.into_iter().enumerate() {
            let now = Nanos(t as u64);
            match st {
                SchedStep::Ready(q) => { ready.insert(q, true); s.handle_event(now, QueueEvent::Ready(QueueId(q))).expect("known"); }
                SchedStep::Idle(q) => { ready.insert(q, false); s.handle_event(now, QueueEvent::Idle(QueueId(q))).expect("known"); }
                SchedStep::Priority(q, p) => {
                    prio.insert(q, p);
                    s.handle_event(now, QueueEvent::Hint { queue: QueueId(q), hint: Hint::Priority(p) }).expect("known");
                }
            }
            while let Some(op) = s.poll_operation() {
                let (map, q, on) = match op {
                    Operation::Suspend(q) => (&mut suspended, q.0, true),
                    Operation::Resume(q) => (&mut suspended, q.0, false),
                    Operation::Protect(q) => (&mut protected, q.0, true),
                    Operation::Unprotect(q) => (&mut protected, q.0, false),
                };
                let before = map.insert(q, on).unwrap_or(false);
                prop_assert_ne!(before, on, "redundant operation {:?}", op);
            }
            // Protected: ready, running, something on its device is suspended (for it), and it
            // alone holds the highest priority registered on its device (nobody can preempt it).
            for (q, p) in &prio {
                let is_ready = ready.get(q).copied().unwrap_or(false);
                let runs = !suspended.get(q).copied().unwrap_or(false);
                let others = suspended.iter().any(|(o, s)| *s && device(*o) == device(*q));
                let strict_top = prio
                    .iter()
                    .filter(|(o, _)| *o != q && device(**o) == device(*q))
                    .all(|(_, op)| op < p);
                let want = is_ready && runs && others && strict_top;
                prop_assert_eq!(protected.get(q).copied().unwrap_or(false), want, "queue {} protection", q);
            }
            for d in 0..2u16 {
                let top = prio.iter()
                    .filter(|(q, _)| device(**q).0 == d && ready.get(q).copied().unwrap_or(false))
                    .map(|(_, p)| *p).max();
                for (q, p) in prio.iter().filter(|(q, _)| device(**q).0 == d) {
                    let is_susp = suspended.get(q).copied().unwrap_or(false);
                    match top {
                        Some(top) if *p >= top => prop_assert!(!is_susp, "top queue {} suspended", q),
                        Some(_) => prop_assert!(is_susp, "lower queue {} runs", q),
                        None => prop_assert!(!is_susp, "nothing ready yet {} suspended", q),
                    }
                }
            }
        }
    }
}
