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

/// `xsched` staged where uid 65534 (nobody) can run it, for the tests that run it as that user
/// (as root only). The build's own binary may lie where that user cannot go (a checkout in a
/// `mktemp -d` directory, mode 0700), so it is copied into a fresh directory of mode 0755 in the
/// temporary directory, which the tests also use for their sockets; removed when dropped. When
/// that user could still not run it, staging panics saying why.
pub struct Nobody {
    dir: tempfile::TempDir,
    xsched: PathBuf,
}

impl Nobody {
    pub const UID: u32 = 65534;

    /// Copy `xsched` into a directory of its own and check that uid 65534 runs it.
    pub fn stage() -> Nobody {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::Builder::new()
            .prefix("xsched-test-nobody-")
            .tempdir()
            .expect("a temporary directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod 0755");
        // Every directory above must let others pass (the execute bit for others).
        for above in dir.path().ancestors().skip(1) {
            let meta = std::fs::metadata(above).expect("a directory above the staging one");
            assert!(
                meta.mode() & 0o001 != 0,
                "cannot stage xsched for uid {}: {} (mode {:o}, uid {}) is closed to other \
                 users, and the staged copy lies below it; set TMPDIR to a directory every user \
                 may enter, like /tmp",
                Nobody::UID,
                above.display(),
                meta.mode() & 0o7777,
                meta.uid(),
            );
        }
        let xsched = dir.path().join("xsched");
        std::fs::copy(XSCHED, &xsched).expect("copy xsched");
        std::fs::set_permissions(&xsched, std::fs::Permissions::from_mode(0o755))
            .expect("chmod 0755");
        let staged = Nobody { dir, xsched };
        match staged.xsched().arg("--version").output() {
            Ok(out) if out.status.success() => staged,
            Ok(out) => panic!(
                "uid {} ran the staged {} but it failed: {}",
                Nobody::UID,
                staged.xsched.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => panic!(
                "uid {} cannot run the staged {}: {e} (is the temporary directory on a noexec \
                 mount? set TMPDIR to another one)",
                Nobody::UID,
                staged.xsched.display()
            ),
        }
    }

    /// The staging directory: root's, mode 0755 (uid 65534 may enter it, not write to it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A command that runs the staged `xsched` as uid and gid 65534, in the staging directory.
    pub fn xsched(&self) -> Command {
        let mut c = Command::new(&self.xsched);
        c.current_dir(self.dir.path());
        std::os::unix::process::CommandExt::uid(&mut c, Nobody::UID);
        std::os::unix::process::CommandExt::gid(&mut c, Nobody::UID);
        c
    }
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
    // top answers in milliseconds when the daemon is not held up (tens under a full test run);
    // a daemon held up by the hostile client would not answer within top's 5 s timeout, and
    // top would fail above. 5 s is over 50 times what it needs.
    assert!(took < Duration::from_secs(5), "top took {took:?}");
    took
}

pub fn row_of(rows: &[serde_json::Value], pid: u32) -> Option<serde_json::Value> {
    rows.iter().find(|r| r["pid"] == pid).cloned()
}

/// What a test needs is missing: a failure under CI (the test command installs it), else a skip
/// that says why.
pub fn skip<T>(why: &str) -> Option<T> {
    assert!(
        std::env::var("CI").is_err(),
        "CI needs this (scripts/test.sh installs it): {why}"
    );
    eprintln!("skipped: {why}");
    None
}

/// The OpenCL shim the workspace's test build leaves beside the test executables
/// (target/*/deps): `cargo nextest run --workspace` builds it, `-p xsched-cli` alone does not.
pub fn opencl_shim() -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("test executable");
    let shim = exe
        .parent()
        .expect("deps folder")
        .join("libxsched_opencl.so");
    if shim.exists() {
        Some(shim)
    } else {
        skip(&format!("{} not built", shim.display()))
    }
}

/// The last line of `text` as JSON (a program's result digest), or a panic showing `text`.
pub fn last_json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A program started under `xsched run` that prints `started` as its first line once its
/// launches are made, and holds until its input closes: wait until `row` (its row in `xsched top` at `socket`, found
/// by its pid: `xsched run` execs it) holds, then release it; its result (the last JSON line it
/// printed), after checking it ended well.
pub fn released_when_seen(
    mut child: Child,
    started: &str,
    socket: &Path,
    row: impl Fn(&serde_json::Value) -> bool,
    what: &str,
) -> serde_json::Value {
    use std::io::{BufRead, BufReader};
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(first, started, "the program ran its launches");
    wait_for(|| row_of(&top(socket), pid).is_some_and(|r| row(&r)), what);
    drop(child.stdin.take());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().expect("ends");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&rest.join("\n"))
}
