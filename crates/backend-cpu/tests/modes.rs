//! Switching a running queue's rollout mode (`XQueue::set_mode`) on the real CPU device under
//! the in-process scheduler: observe releases a held queue and ignores the scheduler from then
//! on; cooperative and preemptive hold it again at once if the scheduler still wants it held.

mod common;

use common::{spin, until};
use std::sync::Arc;
use xsched_backend_cpu::{CpuDevice, CpuQueue};
use xsched_core::{Hint, Level};
use xsched_runtime::{QueueOptions, RolloutMode, Runtime, RuntimeConfig, XQueue};

/// Sets its flag when dropped, also while a panic unwinds.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A high-priority queue (kept busy by the test).
fn busy_high(rt: &Runtime, dev: &CpuDevice) -> XQueue<CpuQueue> {
    rt.create_queue(
        Arc::new(dev.create_queue()),
        QueueOptions::default()
            .with_hint(Hint::Priority(10))
            .expect("hint"),
    )
    .expect("high")
}

#[test]
fn a_held_queue_switched_to_observe_runs_and_back_to_cooperative_is_held_again() {
    let rt = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let dev = CpuDevice::new(1).expect("device");
    let high = busy_high(&rt, &dev);
    let low = rt
        .create_queue(
            Arc::new(dev.create_queue()),
            RolloutMode::Cooperative.apply(
                QueueOptions::default()
                    .with_hint(Hint::Priority(0))
                    .expect("hint"),
            ),
        )
        .expect("low");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Always several commands outstanding: the high queue never goes idle until `stop`.
            let mut outstanding = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                outstanding.push_back(high.submit(spin(500)).expect("submit high"));
                if outstanding.len() > 6
                    && let Some(h) = outstanding.pop_front()
                {
                    let _ = h.wait();
                }
            }
        });
        // A failing assertion below must still stop the busy thread, or the scope never ends.
        let _stop = StopOnDrop(&stop);
        until("the high queue to run", || high.account().completed > 2);
        for _ in 0..20 {
            low.submit(spin(200)).expect("submit low");
        }
        until("the low queue to be held", || low.query().suspended);
        let before = low.account().completed;
        low.set_mode(RolloutMode::Observe).expect("observe");
        // Released while the high queue is still busy: every command of it completes.
        low.wait_all().expect("the observed queue runs");
        assert!(!low.query().suspended);
        assert_eq!(low.account().completed, 20, "from {before}");
        // Back to cooperative: the scheduler still wants it held, so it is, at once.
        low.set_mode(RolloutMode::Cooperative).expect("cooperative");
        assert!(low.query().suspended, "held again on leaving observe");
        assert_eq!(low.query().level, Level::Block);
        low.set_mode(RolloutMode::Preemptive).expect("preemptive");
        assert!(
            low.query().suspended,
            "still held, now at the highest level"
        );
        assert_eq!(low.query().level, Level::Interrupt);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // The high queue went idle: the scheduler resumes the low queue.
    until("the low queue to resume", || !low.query().suspended);
}

#[test]
fn a_queue_created_observing_launches_progressively_once_cooperative() {
    let rt = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(
            Arc::new(dev.create_queue()),
            RolloutMode::Observe.apply(QueueOptions::default()),
        )
        .expect("queue");
    q.suspend()
        .expect("an application may still suspend its own queue");
    for _ in 0..40 {
        q.submit(spin(50)).expect("submit");
    }
    q.set_mode(RolloutMode::Cooperative).expect("cooperative");
    assert!(q.query().suspended, "the application's suspension stands");
    q.resume().expect("resume");
    // Progressive again: at most the default threshold (16) in flight at once.
    let mut most = 0;
    while q.query().completed < 40 {
        most = most.max(q.query().in_flight);
        std::thread::yield_now();
    }
    assert!(most <= 16, "{most} in flight");
    q.wait_all().expect("all");
    assert!(q.account().max_in_flight <= 16);
}
