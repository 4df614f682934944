//! A queue's accounting and its pending bound, over the real CPU device: what the operator reads
//! (`XQueue::account`) agrees with what the queue was made to do, and a queue at its bound holds
//! the submitter instead of growing.
//!
//! Durations are asserted only as lower bounds the work itself implies (a queue suspended for
//! 50 ms made its commands wait at least that; five spin kernels of about 2 ms each, calibrated
//! in iterations, kept a worker busy for well over half of that), never as tight figures: the
//! machines running the tests are noisy.

mod common;

use common::{app_runtime, spin};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::{Hint, Level};
use xsched_runtime::{QueueOptions, RuntimeError};

#[test]
fn the_account_counts_commands_waits_device_time_and_misses() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    // An SLO of 1 us: every command misses it.
    let options = QueueOptions::default()
        .with_hint(Hint::Slo(xsched_core::Nanos::from_us(1)))
        .expect("hint");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), options)
        .expect("queue");
    q.suspend().expect("suspend");
    for _ in 0..5 {
        q.submit(spin(2000)).expect("submit");
    }
    std::thread::sleep(Duration::from_millis(50));
    q.resume().expect("resume");
    q.wait_all().expect("all");
    let a = q.account();
    assert_eq!((a.submitted, a.launched, a.completed), (5, 5, 5));
    assert_eq!(a.cancelled, 0);
    assert!(a.device_time_measured, "the CPU device times its tiles");
    assert!(
        // Spins are calibrated in iterations, so they run about, not exactly, 2 ms each.
        a.device_time >= Duration::from_millis(5),
        "five 2 ms spins: {:?}",
        a.device_time
    );
    assert!(
        a.queue_wait_max >= Duration::from_millis(50),
        "held 50 ms while suspended: {:?}",
        a.queue_wait_max
    );
    assert!(a.queue_wait >= a.queue_wait_max);
    assert!(a.max_in_flight >= 1);
    assert_eq!(a.latency_misses, 5, "an SLO of 1 us");
    assert_eq!(
        a.preemptions, 1,
        "suspended while idle, then held the work that arrived"
    );
    assert!(
        a.suspended >= Duration::from_millis(50),
        "{:?}",
        a.suspended
    );
}

#[test]
fn a_suspension_that_holds_work_is_a_preemption_with_its_time() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(
            Arc::new(dev.create_queue()),
            QueueOptions::default().with_level(Level::Interrupt),
        )
        .expect("queue");
    // The first command blocks until released, so the suspension surely holds work.
    let (release, gate) = crossbeam_channel::bounded::<()>(1);
    q.submit(CpuCommand::host(move || {
        let _ = gate.recv();
    }))
    .expect("submit");
    for _ in 0..20 {
        q.submit(spin(1000)).expect("submit");
    }
    q.suspend().expect("suspend");
    release.send(()).expect("release");
    std::thread::sleep(Duration::from_millis(30));
    q.resume().expect("resume");
    q.wait_all().expect("all");
    let a = q.account();
    assert_eq!(a.preemptions, 1);
    assert!(
        a.suspended >= Duration::from_millis(30),
        "{:?}",
        a.suspended
    );
    assert_eq!(
        a.interrupts, 1,
        "the interrupt found the host command in flight"
    );
    assert_eq!(a.completed, 21);
}

#[test]
fn cancelled_commands_are_counted() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    q.suspend().expect("suspend");
    for _ in 0..7 {
        q.submit(spin(10)).expect("submit");
    }
    assert_eq!(q.cancel_pending().expect("cancel"), 7);
    let a = q.account();
    assert_eq!((a.submitted, a.launched, a.cancelled), (7, 0, 7));
}

#[test]
fn a_queue_at_its_pending_bound_holds_the_submitter_until_a_launch_makes_room() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let bound = NonZeroUsize::new(4).expect("nonzero");
    let q = Arc::new(
        rt.create_queue(
            Arc::new(dev.create_queue()),
            QueueOptions::default().with_max_pending(bound),
        )
        .expect("queue"),
    );
    q.suspend().expect("suspend");
    for _ in 0..4 {
        q.submit(spin(10)).expect("submit below the bound");
    }
    assert_eq!(q.query().pending, 4);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let submitter = {
        let q = q.clone();
        std::thread::spawn(move || {
            let result = q.submit(spin(10)).map(|h| h.id());
            let _ = tx.send(result.is_ok());
        })
    };
    // Not a timing claim: the fifth submit must not return at all while the queue is held.
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "the fifth submit returned past a bound of 4"
    );
    assert_eq!(q.query().pending, 4, "nothing grew past the bound");
    q.resume().expect("resume");
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
    submitter.join().expect("submitter");
    q.wait_all().expect("all");
    assert_eq!(q.account().completed, 5);
}

#[test]
fn a_pending_bound_of_zero_or_nonsense_is_an_error_naming_it() {
    for value in ["0", "many", "-3"] {
        let lookup = |var: &str| (var == "XSCHED_MAX_PENDING").then(|| value.to_string());
        let err = QueueOptions::from_lookup(&lookup).expect_err(value);
        assert!(
            matches!(
                &err,
                RuntimeError::Env {
                    var: "XSCHED_MAX_PENDING",
                    ..
                }
            ),
            "{value}: {err}"
        );
    }
    let lookup = |var: &str| (var == "XSCHED_MAX_PENDING").then(|| "16".to_string());
    let options = QueueOptions::from_lookup(&lookup).expect("16 is a bound");
    assert_eq!(options.max_pending, NonZeroUsize::new(16));
}
