//! Property: whatever the application does (submit, suspend, resume, cancel, reconfigure, wait,
//! at any level), every submitted command either runs exactly once, in submission order, or is
//! reported cancelled and never runs; nothing is lost and closing never hangs.

use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::{LaunchConfig, Level};
use xsched_runtime::{
    CommandError, CommandHandle, QueueOptions, Runtime, RuntimeConfig, WhoSchedules,
};

#[derive(Clone, Debug)]
enum Op {
    Submit(u8),
    Suspend,
    Resume,
    Cancel,
    Config(u32, u32),
    WaitLast,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..20).prop_map(Op::Submit),
        1 => Just(Op::Suspend),
        1 => Just(Op::Resume),
        1 => Just(Op::Cancel),
        1 => (1u32..6, 1u32..6).prop_map(|(a, b)| Op::Config(a.max(b), a.min(b))),
        1 => Just(Op::WaitLast),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_command_runs_once_in_order_or_is_cancelled(
        ops in proptest::collection::vec(op(), 1..30),
        level in 1u8..=3,
    ) {
        let rt = Runtime::new(RuntimeConfig {
            scheduler: WhoSchedules::App,
            ..RuntimeConfig::default()
        }).expect("runtime");
        let dev = CpuDevice::new(2).expect("device");
        let level = Level::try_from(level).expect("level");
        let q = rt
            .create_queue(Arc::new(dev.create_queue()), QueueOptions::default().with_level(level))
            .expect("queue");
        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut handles: Vec<CommandHandle> = Vec::new();
        let mut suspended = false;
        for op in &ops {
            match *op {
                Op::Submit(n) => {
                    for _ in 0..n {
                        let ran = ran.clone();
                        let next = handles.len() as u64;
                        let h = q
                            .submit(CpuCommand::host(move || ran.lock().expect("log").push(next)))
                            .expect("submit");
                        prop_assert_eq!(h.id().0, next);
                        handles.push(h);
                    }
                }
                Op::Suspend => {
                    q.suspend().expect("suspend");
                    suspended = true;
                }
                Op::Resume => {
                    q.resume().expect("resume");
                    suspended = false;
                }
                Op::Cancel => {
                    q.cancel_pending().expect("cancel");
                }
                Op::Config(t, b) => {
                    q.set_config(LaunchConfig::new(t, b).expect("valid")).expect("config");
                }
                Op::WaitLast => {
                    // Waiting on a suspended queue would wait for a resume nobody sends.
                    if !suspended && let Some(h) = handles.last() {
                        let _ = h.wait();
                    }
                }
            }
        }
        q.resume().expect("resume");
        let _ = q.wait_all();
        drop(q);
        let ran = ran.lock().expect("log").clone();
        prop_assert!(ran.windows(2).all(|w| w[0] < w[1]), "in order, once: {:?}", ran);
        for (id, h) in handles.iter().enumerate() {
            let did_run = ran.binary_search(&(id as u64)).is_ok();
            match h.wait() {
                Ok(()) => prop_assert!(did_run, "command {} reported done but never ran", id),
                Err(CommandError::Cancelled) => prop_assert!(!did_run, "cancelled {} ran", id),
                Err(e) => prop_assert!(false, "command {}: {}", id, e),
            }
        }
    }
}
