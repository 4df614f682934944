//! Inline launching (a submit launches on the submitting thread when the queue has room) mixed
//! with deferred launching (the launcher thread, after a synchronization point; the resuming
//! thread, after a suspend), from several submitting threads at once while another thread
//! suspends and resumes the queue: every command runs exactly once, and each thread's commands
//! run in the order it submitted them.

use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::{LaunchConfig, Level};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, WhoSchedules};

fn run(threads: usize, per_thread: usize, threshold: u32, batch: u32, toggles: usize, level: u8) {
    let rt = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let dev = CpuDevice::new(1).expect("device");
    let config = LaunchConfig::new(threshold, batch).expect("valid config");
    let level = Level::try_from(level).expect("1..=3");
    let q = Arc::new(
        rt.create_queue(
            Arc::new(dev.create_queue()),
            QueueOptions::default()
                .with_config(config)
                .with_level(level),
        )
        .expect("queue"),
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for t in 0..threads {
            let (q, log) = (q.clone(), log.clone());
            s.spawn(move || {
                for i in 0..per_thread {
                    let log = log.clone();
                    q.submit(CpuCommand::host(move || {
                        log.lock().expect("log").push((t, i));
                    }))
                    .expect("submit");
                }
            });
        }
        let q = q.clone();
        s.spawn(move || {
            for _ in 0..toggles {
                let _ = q.suspend();
                std::thread::sleep(Duration::from_micros(200));
                let _ = q.resume();
                std::thread::sleep(Duration::from_micros(100));
            }
        });
    });
    q.resume().expect("resume");
    q.wait_all().expect("every command completes");
    let log = log.lock().expect("log");
    assert_eq!(
        log.len(),
        threads * per_thread,
        "each command ran exactly once"
    );
    let mut next = vec![0usize; threads];
    for &(t, i) in log.iter() {
        assert_eq!(i, next[t], "thread {t}'s commands ran out of order");
        next[t] += 1;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_command_runs_once_in_each_threads_order(
        threads in 1usize..4,
        per_thread in 10usize..150,
        threshold in 1u32..10,
        batch_seed in 0u32..10,
        toggles in 0usize..12,
        level in 1u8..=3,
    ) {
        let batch = 1 + batch_seed % threshold;
        run(threads, per_thread, threshold, batch, toggles, level);
    }
}
