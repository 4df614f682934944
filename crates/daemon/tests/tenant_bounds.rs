//! A tenant's bounds (`[limits] tenant_max_pending`, `tenant_inflight_us`): the daemon shares
//! them out over the tenant's queues and each queue's runtime enforces its share: a held
//! low-priority queue at its share of pending commands holds the submitter, and each queue's
//! in-flight budget is its share of the tenant's.

use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::{Hint, Nanos};
use xsched_daemon::{Daemon, DaemonConfig};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, WhoSchedules};

fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn spin(us: u64) -> CpuCommand {
    CpuCommand::Kernel(Arc::new(Spin::new(Duration::from_micros(us))))
}

#[test]
fn a_tenants_queues_share_its_bounds_and_each_enforces_its_share() {
    let socket = std::env::temp_dir().join(format!("xsched-tenant-{}.sock", std::process::id()));
    let config =
        DaemonConfig::parse("[limits]\ntenant_max_pending = 4\ntenant_inflight_us = 1000\n")
            .expect("config");
    let daemon = Daemon::bind_with(&socket, &xsched_core::PolicySpec::default(), &config)
        .expect("bind")
        .spawn()
        .expect("serve");
    let rt = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::Global,
        socket: Some(socket.clone()),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let device = CpuDevice::new(1).expect("device");
    let queue = |priority| {
        let options = QueueOptions::default()
            .with_hint(Hint::Priority(priority))
            .expect("hint");
        Arc::new(
            rt.create_queue(Arc::new(device.create_queue()), options)
                .expect("queue"),
        )
    };
    let (high, low) = (queue(5), queue(0));
    // Two queues of one tenant: 1 000 us and 4 commands, shared out evenly.
    let half = Some(Nanos::from_us(500));
    until("each queue's share of the in-flight time", || {
        high.launch_config().inflight_budget() == half
            && low.launch_config().inflight_budget() == half
    });
    // The high queue holds one command that runs until released (or until this test unwinds,
    // which drops `release`): the daemon holds the low queue all that time.
    let (release, gate) = crossbeam_channel::bounded::<()>(0);
    high.submit(CpuCommand::host(move || {
        let _ = gate.recv();
    }))
    .expect("submit high");
    low.submit(spin(100)).expect("low's first command");
    until("the daemon to hold the low queue", || low.query().suspended);
    // Up to its share of 2 commands pending, submits return (the first may be in flight).
    while low.query().pending < 2 {
        low.submit(spin(100)).expect("under the share");
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let held = low.clone();
    let submitter = std::thread::spawn(move || {
        let _ = tx.send(held.submit(spin(100)).is_ok());
    });
    // Not a timing claim: past its share of 2 the submit must not return while held.
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "a submit past the tenant's share returned while the queue was held"
    );
    assert!(low.query().pending <= 2, "{:?}", low.query());
    drop(release);
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
    let _ = submitter.join();
    low.wait_all().expect("low's commands");
    let a = low.account();
    assert_eq!(a.completed, a.submitted, "every command ran");
    drop((high, low));
    daemon.stop();
}
