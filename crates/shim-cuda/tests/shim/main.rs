//! The shim under an unchanged CUDA program (`tests/c/cuapp.c`, built here with the system
//! compiler and linked with `-lcuda` only) on the fake driver
//! (`crates/backend-cuda/tests/fake/libcuda.c`): identical results and status codes with and
//! without it, the commands really gated (the fake driver logs every stream wait it executes),
//! entry points found through `dlsym` + `cuGetProcAddress` replaced by the shim's, the default
//! streams and graph launches scheduled, captures passed through, and direct forwarding when
//! xsched cannot start.

#[path = "../../../backend-cuda/tests/common/fake.rs"]
mod fake;
#[path = "../../../interpose/tests/support/forks.rs"]
mod forks;
#[path = "../../../interpose/tests/support/program.rs"]
mod program;

mod fallback;
mod gating;
mod lookup;
mod streams;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

struct Setup {
    program: PathBuf,
    shim: PathBuf,
    lib: &'static Path,
}

/// The test program, compiled against the fake driver, and the shim library.
fn setup() -> Option<Setup> {
    if fake::real() {
        eprintln!("skipped: the shim tests drive the fake driver's kernels");
        return None;
    }
    let lib = fake::library_dir();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/cuapp.c");
    let dir = format!("-L{}", lib.display());
    let program = program::build(
        "cuapp",
        &source,
        &[],
        &[&dir, "-lcuda", "-ldl", "-lpthread"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shim = program::shim_library("libxsched_cuda.so");
    Some(Setup { program, shim, lib })
}

/// One run: its output and what the fake driver executed.
struct Run {
    json: serde_json::Value,
    log: String,
    driver: String,
}

impl Setup {
    fn run(&self, shim: bool, env: &[(&str, &str)], tag: &str) -> Run {
        self.run_mode(&["check", "4096", "20"], shim, env, tag)
    }

    fn run_mode(&self, args: &[&str], shim: bool, env: &[(&str, &str)], tag: &str) -> Run {
        self.run_program(&self.program, args, shim, env, tag)
    }

    /// `program` with `args` on the fake driver, under the shim or not.
    fn run_program(
        &self,
        program: &Path,
        args: &[&str],
        shim: bool,
        env: &[(&str, &str)],
        tag: &str,
    ) -> Run {
        let trace = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fake-cuda-{}-{tag}.log", std::process::id()));
        let _ = std::fs::remove_file(&trace);
        let mut c = Command::new(program);
        c.args(args);
        for var in xsched_interpose::STEERING_VARS {
            c.env_remove(var);
        }
        c.env("LD_LIBRARY_PATH", self.lib)
            .env("FAKE_CUDA_LOG", &trace);
        if shim {
            c.env("LD_PRELOAD", &self.shim).env("XSCHED_LOG", "info");
        }
        c.envs(env.iter().copied());
        let out = output_within(c, Duration::from_secs(120), tag);
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{tag} failed: {log}");
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap_or_default();
        let json = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"));
        let driver = std::fs::read_to_string(&trace).unwrap_or_default();
        Run { json, log, driver }
    }
}

/// Run `c` to its end, or kill it and fail the test after `limit`: a deadlocked program must
/// fail the test, not hang it.
fn output_within(mut c: Command, limit: Duration, tag: &str) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the test program starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("the test program's output"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("{tag}: still running after {limit:?} (deadlocked?); killed");
        }
    }
}

/// The fake driver's lines for `stream` (each line's second field), in execution order.
fn lines_of_stream<'a>(driver: &'a str, stream: &str) -> Vec<&'a str> {
    driver
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some(stream))
        .collect()
}

/// On the stream of the first item of `kind` (a log prefix such as `"copy "`) the fake driver
/// ran: for each item of that kind there, in order, whether a gate (`wait`) ran right before it;
/// and the stream's lines, for messages.
fn gated_items<'a>(driver: &'a str, kind: &str) -> (Vec<bool>, Vec<&'a str>) {
    let first = driver
        .lines()
        .find(|l| l.starts_with(kind))
        .unwrap_or_else(|| panic!("no {kind:?} ran: {driver}"));
    let on_stream = lines_of_stream(driver, first.split(' ').nth(1).unwrap_or_default());
    let gated = (0..on_stream.len())
        .filter(|&i| on_stream[i].starts_with(kind))
        .map(|i| i > 0 && on_stream[i - 1].starts_with("wait "))
        .collect();
    (gated, on_stream)
}

fn waits(driver: &str) -> usize {
    driver.lines().filter(|l| l.starts_with("wait ")).count()
}
