//! The shim under an unchanged CUDA program (`tests/c/cuapp.c`, built here with the system
//! compiler and linked with `-lcuda` only) on the fake driver
//! (`crates/backend-cuda/tests/fake/libcuda.c`): identical results and status codes with and
//! without it, the commands really gated (the fake driver logs every stream wait it executes),
//! entry points found through `dlsym` + `cuGetProcAddress` replaced by the shim's, the default
//! streams and graph launches scheduled, captures passed through, and direct forwarding when
//! xsched cannot start.

#[path = "../../backend-cuda/tests/common/fake.rs"]
mod fake;
#[path = "../../interpose/tests/support/forks.rs"]
mod forks;
#[path = "../../interpose/tests/support/program.rs"]
mod program;

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

#[test]
fn an_unchanged_program_gets_identical_results_and_status_codes_through_the_shim() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[], "native");
    let shimmed = s.run(true, &[], "shim");
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        v["proc_is_driver"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&shimmed.json), strip(&native.json));
    assert_eq!(
        native.json["errors"]["launch"], 1,
        "CUDA_ERROR_INVALID_VALUE"
    );
    assert_eq!(native.json["errors"]["ex"], 1);
    assert_eq!(native.json["proc_is_driver"], true);
    assert_eq!(
        shimmed.json["proc_is_driver"], false,
        "dlsym + cuGetProcAddress hand out the shim's cuLaunchKernel"
    );
    assert_eq!(waits(&native.driver), 0);
    // Every scheduled call waited behind its gate: the copy from pinned memory, the memset,
    // launches (plain but the kernel's first, Ex, found through cuGetProcAddress on the legacy
    // and per-thread streams); the failing calls add theirs (their gates are in the stream
    // too). The copies through pageable memory (one in, the readback out) ran ungated: behind a
    // gate they deadlock (the fake driver blocks their caller as a real one may).
    assert!(
        waits(&shimmed.driver) >= 19 + 5,
        "{} gates: {}",
        waits(&shimmed.driver),
        shimmed.driver
    );
    let log = &shimmed.log;
    assert!(
        log.matches("scheduled as XQueue").count() >= 4,
        "the created streams, the legacy and the per-thread stream: {log}"
    );
    assert!(log.contains("stream 0x1 scheduled"), "legacy stream: {log}");
    assert!(
        log.contains("stream 0x2 scheduled"),
        "per-thread stream: {log}"
    );
    assert!(log.contains("captured into a graph"), "{log}");
    assert!(log.contains("pageable host memory"), "{log}");
    // On the program's first stream the pinned copy waits behind a gate and the pageable one
    // (same size, next) does not.
    let (gated, on_stream) = gated_items(&shimmed.driver, "copy ");
    assert!(gated.len() >= 2, "{on_stream:?}");
    assert!(
        gated[0],
        "the pinned copy waited behind its gate: {on_stream:?}"
    );
    assert!(!gated[1], "the pageable copy ran ungated: {on_stream:?}");
    // The graph launch is scheduled: on its stream, a gate comes right before the graph's
    // nodes (the fake driver logs each node as it runs, then `graph <stream> <nodes>`).
    let graph = shimmed
        .driver
        .lines()
        .find(|l| l.starts_with("graph "))
        .unwrap_or_else(|| panic!("the graph ran: {}", shimmed.driver));
    let fields: Vec<&str> = graph.split(' ').collect();
    let (stream, nodes) = (fields[1], fields[2].parse::<usize>().expect("node count"));
    let on_stream = lines_of_stream(&shimmed.driver, stream);
    let at = on_stream.iter().position(|l| *l == graph).unwrap_or(0);
    assert!(
        at > nodes && on_stream[at - nodes - 1].starts_with("wait "),
        "the graph waited behind its gate: {on_stream:?}"
    );
    assert!(
        native.driver.contains("graph ") && waits(&native.driver) == 0,
        "natively the same graph ran ungated: {}",
        native.driver
    );
}

/// A driver whose first launch of a kernel synchronizes the context (lazy loading may): the
/// first launch goes ungated, so the program finishes with the native result instead of
/// waiting for its own gate; every later launch of the kernel is gated again.
#[test]
fn a_first_launch_that_synchronizes_the_context_does_not_wait_behind_its_gate() {
    let Some(s) = setup() else { return };
    let lazy = [("FAKE_CUDA_LAZY_LOAD", "1")];
    let native = s.run(false, &lazy, "lazy-native");
    let shimmed = s.run(true, &lazy, "lazy-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    assert!(shimmed.log.contains("first launch"), "{}", shimmed.log);
    // On the stream of the first launch, the first axpy ran without a gate right before it and
    // the next one behind its gate.
    let (gated, on_stream) = gated_items(&shimmed.driver, "axpy ");
    assert!(gated.len() >= 2, "{on_stream:?}");
    assert!(!gated[0], "the first launch ran ungated: {on_stream:?}");
    assert!(
        gated[1],
        "the second launch waited behind its gate: {on_stream:?}"
    );
    assert!(
        waits(&shimmed.driver) >= 19,
        "the later launches waited behind their gates: {}",
        shimmed.driver
    );
}

/// A module unloaded and loaded again: the fake driver hands out the same kernel address for a
/// kernel new to it, whose first launch loads it (and synchronizes the context). That launch
/// goes ungated too, instead of counting as loaded by its address and waiting behind its gate.
#[test]
fn a_kernel_at_a_reused_address_after_an_unload_is_launched_ungated_first() {
    let Some(s) = setup() else { return };
    let lazy = [("FAKE_CUDA_LAZY_LOAD", "1")];
    let args = ["reload", "4096", "5"];
    let native = s.run_mode(&args, false, &lazy, "reload-native");
    let shimmed = s.run_mode(&args, true, &lazy, "reload-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    let (gated, on_stream) = gated_items(&shimmed.driver, "axpy ");
    assert_eq!(gated.len(), 10, "{on_stream:?}");
    for (i, gated) in gated.iter().enumerate() {
        let first_of_its_module = i % 5 == 0;
        assert_eq!(
            *gated, !first_of_its_module,
            "launch {i}: only each module's first launch runs ungated: {on_stream:?}"
        );
    }
    assert!(
        !shimmed.log.contains("behind its own gate"),
        "no launch waited for the backend's backstop: {}",
        shimmed.log
    );
}

#[test]
fn unusable_xsched_settings_fall_back_to_direct_forwarding() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[], "ref");
    for (var, value, says) in [
        ("XSCHED_SCHEDULER", "remote", "shim disabled"),
        ("XSCHED_PRIORITY", "high", "passed through unscheduled"),
    ] {
        let out = s.run(true, &[(var, value)], var);
        assert_eq!(
            out.json["checksum"], native.json["checksum"],
            "{var}={value}"
        );
        assert_eq!(out.json["errors"], native.json["errors"], "{var}={value}");
        assert_eq!(waits(&out.driver), 0, "nothing gated: {}", out.driver);
        assert!(
            out.log.contains(says) && out.log.contains(var),
            "{}",
            out.log
        );
    }
}

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

/// As reported against XSched upstream: a hard-coded Level 2 crashed on a GPU that offers Level 1
/// only.
/// Here, on a device without stream memory operations (the fake driver's `FAKE_CUDA_NO_MEMOPS`)
/// the shim cannot gate commands at any level, so at Level 1 or 2 it leaves every stream to the
/// driver: the program's results and status codes are unchanged, and the log says why.
#[test]
fn level_2_asked_of_a_level_1_device_runs_the_program_unchanged_and_says_why() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[("FAKE_CUDA_NO_MEMOPS", "1")], "nomemops-ref");
    for level in ["1", "2"] {
        let out = s.run(
            true,
            &[("FAKE_CUDA_NO_MEMOPS", "1"), ("XSCHED_LEVEL", level)],
            &format!("nomemops-level-{level}"),
        );
        assert_eq!(
            out.json["checksum"], native.json["checksum"],
            "level {level}"
        );
        assert_eq!(out.json["errors"], native.json["errors"], "level {level}");
        // Every stream is left to the driver, named once, with the reason.
        assert!(
            out.log.contains("passed through unscheduled")
                && out.log.contains("no stream memory operations"),
            "the reason is named: {}",
            out.log
        );
    }
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

/// As reported against XSched upstream (vLLM on an A10): programs that reach the driver the CUDA
/// runtime's way are never linked against libcuda; they `dlopen` it and take every entry point
/// from `cuGetProcAddress_v2`, found with `dlsym` on the driver's handle or through
/// `dlsym(RTLD_NEXT)`, at CUDA 12 or CUDA 13 version numbers. Such a program
/// (`tests/c/cudart_like.c`) gets the native result under the shim each way, with its stream
/// scheduled and its launches gated.
#[test]
fn a_program_that_finds_the_driver_only_through_cu_get_proc_address_is_scheduled() {
    let Some(s) = setup() else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/cudart_like.c");
    let program =
        program::build("cudart_like", &source, &[], &["-ldl"]).unwrap_or_else(|e| panic!("{e}"));
    for lookup in ["handle", "next"] {
        for version in ["12040", "13000"] {
            let args = ["2048", "10", lookup, version];
            let tag = format!("cudart-{lookup}-{version}");
            let native = s.run_program(&program, &args, false, &[], &format!("{tag}-ref"));
            let shimmed = s.run_program(&program, &args, true, &[], &tag);
            assert_eq!(shimmed.json["checksum"], native.json["checksum"], "{tag}");
            assert_eq!(waits(&native.driver), 0, "{tag}");
            assert!(
                shimmed.log.contains("scheduled as XQueue"),
                "{tag}: the stream is scheduled: {}",
                shimmed.log
            );
            // Its copies are through pageable memory, so they run ungated (`pageable.rs`).
            assert!(
                waits(&shimmed.driver) >= 10,
                "{tag}: the launches waited behind their gates: {}",
                shimmed.driver
            );
        }
    }
}

/// The shim's `dlsym` keeps the caller of every other lookup: a library opened `RTLD_LOCAL` (as
/// Python opens extension modules) finds a symbol of its own dependency with `RTLD_DEFAULT`,
/// and `RTLD_NEXT` from it finds the next definition after it, under the shim as natively.
#[test]
fn lookups_through_the_shims_dlsym_answer_relative_to_their_caller() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/dlsym_scope.c");
    let shared = ["-shared", "-fPIC"];
    let build = |name: &str, flags: &[&str], link: &[&str]| {
        program::build(name, &source, flags, link).unwrap_or_else(|e| panic!("{e}"))
    };
    let libb = build("dlsym-b", &[&shared[..], &["-DPART_B"]].concat(), &[]);
    let liba_link = libb.to_string_lossy().into_owned();
    let liba = build(
        "dlsym-a",
        &[&shared[..], &["-DPART_A"]].concat(),
        // Kept as a dependency though liba names none of its symbols at link time.
        &["-Wl,--no-as-needed", &liba_link, "-ldl"],
    );
    let main = build("dlsym-main", &[], &["-ldl"]);
    let shim = program::shim_library("libxsched_cuda.so");
    let run = |preload: bool| {
        let mut c = Command::new(&main);
        c.arg(&liba);
        for var in xsched_interpose::STEERING_VARS {
            c.env_remove(var);
        }
        if preload {
            c.env("LD_PRELOAD", &shim);
        }
        let out = output_within(c, Duration::from_secs(60), "dlsym");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(false), r#"{"default":1,"next":2}"#, "natively");
    assert_eq!(run(true), r#"{"default":1,"next":2}"#, "under the shim");
}

/// Under `CUDA_LAUNCH_BLOCKING=1` (the real driver's variable, which the fake driver follows)
/// every launch returns only once its stream ran it, so a gated launch would wait behind its own
/// gate until the backend's backstop let it through (milliseconds a launch). The shim knows the
/// setting: every launch goes to the driver ungated, in stream order, and the program finishes
/// with the native result; only its other commands wait behind gates.
#[test]
fn under_launch_blocking_every_launch_goes_ungated_with_the_native_result() {
    let Some(s) = setup() else { return };
    let blocking = [("CUDA_LAUNCH_BLOCKING", "1")];
    let native = s.run(false, &blocking, "blocking-native");
    let shimmed = s.run(true, &blocking, "blocking-shim");
    let gated = s.run(true, &[], "blocking-off-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    assert_eq!(shimmed.json["errors"], native.json["errors"]);
    assert!(
        shimmed.log.contains("CUDA_LAUNCH_BLOCKING=1")
            && !shimmed.log.contains("behind its own gate"),
        "said once, and no launch waited for the backstop: {}",
        shimmed.log
    );
    assert!(
        waits(&shimmed.driver) < waits(&gated.driver),
        "fewer gates than with asynchronous launches: {} against {}",
        waits(&shimmed.driver),
        waits(&gated.driver)
    );
}
