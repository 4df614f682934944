//! The fork and exec tests both shims run on their C programs (included with `#[path]`), against
//! a daemon in the test process. The program's `fork MS stay|exec` mode uses one scheduled
//! queue, forks, and prints `{"pid","child"}`; the parent goes on using its queue for MS and
//! exits.
//!
//! - `stay`: the child sleeps 2·MS without touching the API. It must not hold its parent's
//!   daemon connection: when the parent exits, the parent's queues leave the daemon while the
//!   child still lives, and the child never registers any.
//! - `exec`: the child execs the program's `hold` mode (one queue) under the same `LD_PRELOAD`.
//!   It must register exactly one agent's queues (one queue, no duplicates), beside the
//!   parent's own.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};
use xsched_proto::client;

/// The daemon's rows, as (pid, queue).
fn rows(socket: &Path) -> Vec<(u32, u32)> {
    let mut s = client::connect(socket, Duration::from_secs(5)).expect("operator connects");
    client::top(&mut s)
        .expect("top")
        .into_iter()
        .map(|r| (r.pid, r.queue))
        .collect()
}

fn of(rows: &[(u32, u32)], pid: u32) -> Vec<u32> {
    let mut queues: Vec<u32> = rows.iter().filter(|r| r.0 == pid).map(|r| r.1).collect();
    queues.sort_unstable();
    queues
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"))
}

/// The parent's and the child's pids from the program's first line.
fn pids(child: &mut Child) -> (u32, u32) {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let pid = |k: &str| {
        v[k].as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .expect("a pid")
    };
    (pid("pid"), pid("child"))
}

/// Run both cases. `spawn(mode, socket)` starts the program's `fork` mode with the shim, the
/// global scheduler at `socket`, and stdout piped.
pub fn check(name: &str, spawn: impl Fn(&str, &Path) -> Child) {
    let socket =
        std::env::temp_dir().join(format!("xsched-fork-{name}-{}.sock", std::process::id()));
    let daemon = xsched_daemon::Daemon::bind(&socket, &xsched_daemon::PolicySpec::default())
        .expect("daemon binds")
        .spawn()
        .expect("daemon runs");

    let mut parent = spawn("stay", &socket);
    let (pid, child) = pids(&mut parent);
    wait_until("the parent's queue registered", || {
        !of(&rows(&socket), pid).is_empty()
    });
    assert!(
        parent.wait().expect("parent ends").success(),
        "the parent failed"
    );
    wait_until("the parent's queues released after it exited", || {
        of(&rows(&socket), pid).is_empty()
    });
    assert!(
        alive(child),
        "the forked child must still be alive here: its parent's queues left without waiting for it"
    );
    assert!(
        of(&rows(&socket), child).is_empty(),
        "the child never used the API"
    );

    let mut parent = spawn("exec", &socket);
    let (pid, child) = pids(&mut parent);
    wait_until("the exec'd child's queue registered", || {
        !of(&rows(&socket), child).is_empty()
    });
    let now = rows(&socket);
    assert_eq!(
        of(&now, child).len(),
        1,
        "exactly one agent's one queue in the exec'd child"
    );
    assert!(of(&now, pid).len() <= 1, "the parent's own queue, once");
    assert!(
        parent.wait().expect("parent ends").success(),
        "the parent failed"
    );
    wait_until("every queue released", || {
        let now = rows(&socket);
        of(&now, pid).is_empty() && of(&now, child).is_empty()
    });
    daemon.stop();
}
