//! Streams over a process's life: forked children and exec, per-thread and default streams
//! released with their threads and contexts, and several streams that wait on each other's
//! events, alone and at mixed priorities under the daemon.

use super::{forks, setup, waits};
use std::process::{Command, Stdio};

#[test]
fn forked_children_start_clean_and_exec_registers_one_agent() {
    let Some(s) = setup() else { return };
    forks::check("cuda", |mode, socket| {
        let mut c = Command::new(&s.program);
        c.args(["fork", "1024", "800", mode]);
        for var in xsched_interpose::STEERING_VARS {
            c.env_remove(var);
        }
        c.env("LD_LIBRARY_PATH", s.lib)
            .env("LD_PRELOAD", &s.shim)
            .env("XSCHED_SCHEDULER", "global")
            .env("XSCHED_SOCKET", socket)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the test program starts")
    });
}

#[test]
fn streams_of_exited_threads_and_destroyed_contexts_are_released() {
    let Some(s) = setup() else { return };
    let run = s.run_mode(&["threads", "1024", "5"], true, &[], "threads");
    assert_eq!(run.json["threads"], 5);
    let log = &run.log;
    assert_eq!(
        log.matches("stream 0x2 scheduled").count(),
        5,
        "one per-thread stream per thread: {log}"
    );
    assert_eq!(
        log.matches("exited: its 1 per-thread stream(s) released")
            .count(),
        5,
        "each thread's per-thread stream released when the thread exits: {log}"
    );
    assert!(
        log.contains("destroyed: its 1 default stream(s) released"),
        "the legacy stream released with its context: {log}"
    );
    assert!(
        waits(&run.driver) >= 6,
        "the commands were gated: {}",
        run.driver
    );
}

/// XSched's upstream PR 30: several streams in one process deadlocked its per-stream policy.
/// Here two streams of one program, the second waiting on an event of the first every round,
/// finish under the shim with the native result, each stream scheduled.
#[test]
fn streams_that_wait_on_each_others_events_finish_with_the_native_result() {
    let Some(s) = setup() else { return };
    let args = ["crossdep", "2048", "12"];
    let native = s.run_mode(&args, false, &[], "crossdep-ref");
    let shimmed = s.run_mode(&args, true, &[], "crossdep-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    assert_eq!(
        shimmed.log.matches("scheduled as XQueue").count(),
        2,
        "both streams scheduled: {}",
        shimmed.log
    );
    assert_eq!(
        shimmed.driver.matches("evwait ").count(),
        12,
        "every round waited on its event: {}",
        shimmed.driver
    );
    assert!(
        waits(&shimmed.driver) >= 12 * 3,
        "the copies and kernels were gated"
    );
}

/// Eight streams of one process at mixed CUDA priorities under the daemon's fixed priority, each
/// high stream waiting every round on an event its low partner records: the high streams' work
/// must not wait for ever behind a low stream that is suspended for them (no deadlock), every
/// command runs once (the native checksum), and each stream is scheduled at the priority its
/// CUDA priority maps to.
#[test]
fn eight_streams_at_mixed_priorities_under_the_daemon_finish_with_the_native_result() {
    let Some(s) = setup() else { return };
    let args = ["mixed", "1024", "10"];
    let native = s.run_mode(&args, false, &[], "mixed-ref");
    let socket =
        std::env::temp_dir().join(format!("xsched-cuda-mixed-{}.sock", std::process::id()));
    let daemon = xsched_daemon::Daemon::bind(&socket, &xsched_core::PolicySpec::default())
        .expect("daemon binds")
        .spawn()
        .expect("daemon runs");
    let socket_env = socket.display().to_string();
    let env = [
        ("XSCHED_SCHEDULER", "global"),
        ("XSCHED_SOCKET", socket_env.as_str()),
        ("XSCHED_PRIORITY", "3"),
    ];
    let shimmed = s.run_mode(&args, true, &env, "mixed-shim");
    daemon.stop();
    assert_eq!(
        shimmed.json["checksum"], native.json["checksum"],
        "{}",
        shimmed.log
    );
    assert_eq!(
        shimmed.log.matches("scheduled as XQueue").count(),
        9,
        "the setup stream and the 8 streams: {}",
        shimmed.log
    );
    assert_eq!(
        shimmed.driver.matches("evwait ").count(),
        4 * 10,
        "every round waited on its event"
    );
    for priority in ["priority 3", "priority 4"] {
        assert!(
            shimmed.log.contains(priority),
            "{priority}: {}",
            shimmed.log
        );
    }
}
