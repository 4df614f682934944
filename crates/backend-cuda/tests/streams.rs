//! The CUDA backend on the fake driver (`tests/fake/libcuda.c`), or on a real GPU with
//! `XSCHED_CUDA_REAL=1` (scripts/gpu-check.sh): commands run and complete in order, a
//! deactivated stream holds its queued commands behind the gate while another stream runs,
//! synchronization waits for what was launched, and a device without stream memory operations is
//! Level 1 only.

#[path = "common/fake.rs"]
mod fake;
#[path = "common/work.rs"]
mod work;

use std::sync::Arc;
use work::Work;
use xsched_backend_cuda::{CudaCommand, CudaError, CudaStream, GATE_DEPTH, sys};
use xsched_core::Level;
use xsched_runtime::{HwQueue, QueueOptions, Runtime, RuntimeConfig, WhoSchedules, XQueue};

fn app_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

fn stream() -> Arc<CudaStream> {
    fake::use_driver();
    Arc::new(CudaStream::new(0).expect("a stream on device 0"))
}

#[test]
fn devices_are_listed_with_level_2() {
    fake::use_driver();
    let devices = xsched_backend_cuda::devices().expect("devices");
    assert!(!devices.is_empty());
    assert_eq!(devices[0].id, xsched_backend_cuda::device_id(0));
    assert!(devices[0].stream_memops, "{devices:?}");
    let s = stream();
    assert_eq!(s.capabilities().max_level, Level::Deactivate);
}

#[test]
fn commands_run_and_complete_in_submission_order() {
    let hw = stream();
    let work = Work::new(40);
    let rt = app_runtime();
    let q = rt.create_queue(hw, QueueOptions::default()).expect("queue");
    let handles: Vec<_> = (0..40)
        .map(|t| q.submit(work.command(100, t)).expect("submit"))
        .collect();
    for h in &handles {
        h.wait().expect("command ok");
    }
    q.wait_all().expect("all ok");
    assert_eq!(work.tags(), (0..40).collect::<Vec<_>>());
}

/// A background queue of long commands is suspended (Level 2) while a foreground command runs:
/// at most the commands past their gate finish first, the rest wait until it resumes.
#[test]
fn a_deactivated_stream_holds_queued_work_behind_its_gate() {
    let bg_hw = stream();
    let fg_hw = Arc::new(CudaStream::new(0).expect("second stream"));
    let work = Work::new(32);
    let rt = app_runtime();
    let bg: XQueue<CudaStream> = rt
        .create_queue(bg_hw, QueueOptions::default().with_level(Level::Deactivate))
        .expect("bg queue");
    let fg = rt
        .create_queue(fg_hw, QueueOptions::default())
        .expect("fg queue");
    let bg_cmds: Vec<_> = (0..16)
        .map(|t| bg.submit(work.command(2000, t)).expect("submit"))
        .collect();
    // Let the first commands start, then preempt.
    bg_cmds[0].wait().expect("first bg command");
    bg.suspend().expect("suspend at Level 2");
    let at_suspend = work.tags().len();
    fg.submit(work.command(100, 100))
        .expect("submit fg")
        .wait()
        .expect("fg runs while bg is held");
    // Ten background commands' worth of time: without the gate they would all keep running.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let held = work.tags();
    let bg_after = held.iter().filter(|&&t| t < 100).count() - at_suspend;
    assert!(
        bg_after <= GATE_DEPTH as usize,
        "only commands past an open gate ran after the suspend: {at_suspend} then {held:?}"
    );
    assert!(held.contains(&100), "the foreground ran: {held:?}");
    bg.resume().expect("resume");
    bg.wait_all().expect("background completes");
    let all = work.tags();
    let bg_order: Vec<u32> = all.iter().copied().filter(|&t| t < 100).collect();
    assert_eq!(
        bg_order,
        (0..16).collect::<Vec<_>>(),
        "in order, exactly once"
    );
}

#[test]
fn synchronize_waits_for_launched_commands() {
    let hw = stream();
    let work = Work::new(8);
    let rt = app_runtime();
    let q = rt
        .create_queue(hw.clone(), QueueOptions::default())
        .expect("queue");
    for t in 0..8 {
        q.submit(work.command(500, t)).expect("submit");
    }
    q.wait_all().expect("done");
    hw.synchronize().expect("nothing outstanding");
    assert_eq!(work.tags().len(), 8);
}

#[test]
fn a_failing_enqueue_fails_its_command_only() {
    let hw = stream();
    let work = Work::new(4);
    let rt = app_runtime();
    let q = rt.create_queue(hw, QueueOptions::default()).expect("queue");
    let bad = CudaCommand::Enqueue(Box::new(|_| {
        Err(CudaError::Call {
            call: "cuLaunchKernel",
            code: sys::CUresult::CUDA_ERROR_INVALID_VALUE,
        })
    }));
    let failed = q.submit(bad).expect("submit");
    let ok = q.submit(work.command(10, 7)).expect("submit");
    assert!(failed.wait().is_err());
    ok.wait().expect("the next command still runs");
    assert_eq!(work.tags(), [7]);
}

/// Run `test` in a child process with `var=1` in its environment (the fake driver reads it).
fn in_child_with(var: &str, test: &str) -> bool {
    if std::env::var(var).is_ok() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(var, "1")
        .output()
        .expect("child test runs");
    assert!(
        out.status.success(),
        "{test} with {var}=1: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

#[test]
fn without_stream_memory_operations_a_stream_is_level_1_only() {
    if fake::real()
        || !in_child_with(
            "FAKE_CUDA_NO_MEMOPS",
            "without_stream_memory_operations_a_stream_is_level_1_only",
        )
    {
        return;
    }
    let hw = stream();
    assert_eq!(hw.capabilities().max_level, Level::Block);
    assert!(hw.deactivate().is_err(), "Level 2 is refused, never faked");
    let work = Work::new(6);
    let rt = app_runtime();
    assert!(
        rt.create_queue(
            hw.clone(),
            QueueOptions::default().with_level(Level::Deactivate)
        )
        .is_err()
    );
    let q = rt
        .create_queue(hw, QueueOptions::default())
        .expect("Level 1 queue");
    for t in 0..6 {
        q.submit(work.command(100, t)).expect("submit");
    }
    q.wait_all().expect("done");
    assert_eq!(work.tags(), (0..6).collect::<Vec<_>>());
}

/// A call enqueued behind its gate that waits for the stream to reach it (as a launch under
/// `CUDA_LAUNCH_BLOCKING=1` or a copy through pageable memory does) would wait for ever: the
/// XQueue launches the command only after the call returns. The watcher opens that gate once
/// every gate before it is open.
#[test]
fn a_call_that_waits_for_its_stream_is_let_through_its_own_gate() {
    let hw = stream();
    let work = Work::new(3);
    let rt = app_runtime();
    let q = rt
        .create_queue(hw.clone(), QueueOptions::default())
        .expect("queue");
    // Two commands first, complete (so the blocked call's gate is the next to open whenever the
    // XQueue launched them).
    for t in 0..2 {
        q.submit(work.command(1_000, t))
            .expect("submit")
            .wait()
            .expect("command ok");
    }
    let CudaCommand::Enqueue(launch) = work.command(100, 2) else {
        unreachable!("Work::command enqueues")
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let blocked = hw.clone();
    std::thread::spawn(move || {
        let made = blocked.enqueue(|s| {
            let launched = launch(s);
            // SAFETY: `s` is the stream `enqueue` hands the call.
            let synced = unsafe { sys::cuStreamSynchronize(s) };
            launched.and_then(|()| CudaError::check("cuStreamSynchronize", synced))
        });
        let _ = tx.send(made);
    });
    let (result, ticket) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the blocking call returned (not stuck behind its own gate)")
        .expect("enqueued");
    result.expect("the call succeeded");
    q.submit(CudaCommand::Enqueued(ticket))
        .expect("submit")
        .wait()
        .expect("command ok");
    assert_eq!(work.tags(), [0, 1, 2]);
}
