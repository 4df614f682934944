//! What the process-level tests share: a daemon process, scheduled worker processes, and
//! `xsched top` as an operator runs it.
#![allow(dead_code)] // each test binary uses its own part

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const XSCHED: &str = env!("CARGO_BIN_EXE_xsched");

/// A unique socket path for one test.
pub fn socket(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("xsched-test-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A running `xsched serve`, killed when dropped.
pub struct Daemon(pub Child);

impl Daemon {
    /// `xsched serve` on `socket` with the defaults.
    pub fn start(socket: &Path) -> Daemon {
        Daemon::start_with(socket, &[])
    }

    /// `xsched serve` on `socket` with more arguments (`--policy`, `--config`).
    pub fn start_with(socket: &Path, args: &[&str]) -> Daemon {
        Daemon::start_by(Command::new(XSCHED), socket, args)
    }

    /// `xsched serve` on `socket` as `command` runs it (another user, say).
    pub fn start_by(mut command: Command, socket: &Path, args: &[&str]) -> Daemon {
        let child = command
            .args(["serve", "--socket"])
            .arg(socket)
            .args(args)
            .stderr(Stdio::null())
            .spawn()
            .expect("xsched serve starts");
        wait_for(
            || UnixStream::connect(socket).is_ok(),
            "the daemon to listen",
        );
        Daemon(child)
    }

    /// Send the daemon a signal (`STOP`, `CONT`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A scheduled worker process.
pub fn worker(socket: &Path, priority: i32, kernel_us: u64, commands: u32) -> Child {
    worker_with(socket, priority, kernel_us, commands, &[])
}

/// A scheduled worker process with more environment variables.
pub fn worker_with(
    socket: &Path,
    priority: i32,
    kernel_us: u64,
    commands: u32,
    env: &[(&str, &str)],
) -> Child {
    Command::new(XSCHED)
        .args(["worker", "--kernel-us", &kernel_us.to_string()])
        .args(["--commands", &commands.to_string()])
        .env("XSCHED_SCHEDULER", "global")
        .env("XSCHED_SOCKET", socket)
        .env("XSCHED_PRIORITY", priority.to_string())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("worker starts")
}

/// Whether this process runs as root (needed to run processes as another user).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// A command that runs `xsched` as uid and gid 65534 (nobody).
pub fn as_nobody() -> Command {
    let mut c = Command::new(XSCHED);
    std::os::unix::process::CommandExt::uid(&mut c, 65534);
    std::os::unix::process::CommandExt::gid(&mut c, 65534);
    c
}

pub fn finished(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().expect("worker ends");
    assert!(out.status.success(), "worker failed");
    serde_json::from_slice(&out.stdout).expect("worker prints JSON")
}

/// `xsched top --once --json` as `command` runs it: the document, or the error it printed.
pub fn top_by(mut command: Command, socket: &Path) -> Result<serde_json::Value, String> {
    let out = command
        .args(["top", "--once", "--json", "--socket"])
        .arg(socket)
        .output()
        .expect("top runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("top printed no JSON: {e}"))
}

/// `xsched top --once --json` rows (the policy must be `hpf`).
pub fn top(socket: &Path) -> Vec<serde_json::Value> {
    let doc = top_by(Command::new(XSCHED), socket).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(doc["policy"], "hpf");
    doc["rows"].as_array().cloned().unwrap_or_default()
}

/// How long an operator's `xsched top --once` took to answer, checked to succeed within 5 s
/// (its own timeout): the figure the hostile-client tests print.
pub fn timed_top(socket: &Path) -> Duration {
    let started = Instant::now();
    let doc = top_by(Command::new(XSCHED), socket).unwrap_or_else(|e| panic!("top failed: {e}"));
    let took = started.elapsed();
    assert!(doc["rows"].is_array());
    assert!(took < Duration::from_secs(5), "top took {took:?}");
    took
}

pub fn row_of(rows: &[serde_json::Value], pid: u32) -> Option<serde_json::Value> {
    rows.iter().find(|r| r["pid"] == pid).cloned()
}
