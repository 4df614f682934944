//! The shim under an unchanged OpenCL C program (`tests/c/vecprog.c`, built here with the
//! system compiler and linked with `-lOpenCL` only) on POCL: identical results with and without
//! it, status codes passed back unchanged, direct forwarding when xsched cannot start, and a
//! foreground and a background process scheduled through the daemon.
//!
//! Without OpenCL or a C compiler these tests fail under CI (`CI=true`) and are skipped
//! elsewhere, saying why (`scripts/test.sh` installs POCL, the loader and the headers).

#[path = "../../interpose/tests/support/forks.rs"]
mod forks;
#[path = "../../interpose/tests/support/program.rs"]
mod program;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Setup {
    program: PathBuf,
    shim: PathBuf,
}

fn skip(why: &str) -> Option<Setup> {
    assert!(
        std::env::var("CI").is_err(),
        "CI needs this (scripts/test.sh installs it): {why}"
    );
    eprintln!("skipped: {why} (scripts/test.sh installs POCL and the OpenCL headers)");
    None
}

/// The test program, compiled for this test process, and the shim library.
fn setup() -> Option<Setup> {
    if let Err(e) = xsched_backend_opencl::devices() {
        return skip(&e.to_string());
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/vecprog.c");
    let program = match program::build(
        "vecprog",
        &source,
        &["-Wno-deprecated-declarations"],
        &["-lOpenCL", "-lm"],
    ) {
        Ok(p) => p,
        Err(e) => return skip(&e),
    };
    let shim = program::shim_library("libxsched_opencl.so");
    Some(Setup { program, shim })
}

impl Setup {
    fn command(&self, args: &[&str], shim: bool) -> Command {
        let mut c = Command::new(&self.program);
        c.args(args);
        for var in xsched_interpose::STEERING_VARS {
            c.env_remove(var);
        }
        if shim {
            c.env("LD_PRELOAD", &self.shim).env("XSCHED_LOG", "info");
        }
        c
    }

    fn run(&self, args: &[&str], shim: bool, env: &[(&str, &str)]) -> Output {
        let mut c = self.command(args, shim);
        c.envs(env.iter().copied());
        let out = c.output().expect("the test program runs");
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

fn json(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"))
}

const CHECK: [&str; 4] = ["check", "4096", "50", "12"];

#[test]
fn an_unchanged_program_gets_identical_results_and_status_codes_through_the_shim() {
    let Some(s) = setup() else { return };
    let native = s.run(&CHECK, false, &[]);
    let shimmed = s.run(&CHECK, true, &[]);
    assert_eq!(json(&shimmed.stdout), json(&native.stdout));
    let doc = json(&native.stdout);
    assert_eq!(doc["read_status"], 0);
    assert_eq!(doc["profiled"], true, "profiling events keep real times");
    assert_eq!(doc["errors"]["queue"], -36, "CL_INVALID_COMMAND_QUEUE");
    assert_eq!(doc["errors"]["work_dim"], -53, "CL_INVALID_WORK_DIMENSION");
    let log = String::from_utf8_lossy(&shimmed.stderr);
    assert_eq!(
        log.matches("scheduled as XQueue").count(),
        2,
        "the in-order and the profiling queue are scheduled: {log}"
    );
    assert_eq!(
        log.matches("passed through unscheduled").count(),
        1,
        "one line for the out-of-order queue: {log}"
    );
}

/// Every rollout mode (`XSCHED_MODE`) leaves an unchanged program's results and status codes as
/// they are natively on POCL; the queues still go through their XQueues.
#[test]
fn every_rollout_mode_gives_the_native_results() {
    let Some(s) = setup() else { return };
    let native = json(&s.run(&CHECK, false, &[]).stdout);
    for mode in ["observe", "cooperative", "preemptive"] {
        let out = s.run(&CHECK, true, &[("XSCHED_MODE", mode)]);
        assert_eq!(json(&out.stdout), native, "XSCHED_MODE={mode}");
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            log.matches("scheduled as XQueue").count(),
            2,
            "{mode}: {log}"
        );
    }
}

#[test]
fn unusable_xsched_settings_fall_back_to_direct_forwarding() {
    let Some(s) = setup() else { return };
    let native = json(&s.run(&CHECK, false, &[]).stdout);
    for (var, value, says) in [
        ("XSCHED_SCHEDULER", "remote", "shim disabled"),
        ("XSCHED_PRIORITY", "high", "passed through unscheduled"),
        ("XSCHED_MODE", "preempt", "passed through unscheduled"),
    ] {
        let out = s.run(&CHECK, true, &[(var, value)]);
        assert_eq!(json(&out.stdout), native, "{var}={value}");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains(says) && log.contains(var), "{log}");
    }
}

/// A foreground run's JSON, with a background process beside it when `bg` is set.
fn fg_beside(
    s: &Setup,
    shim: bool,
    env: &[(&str, &str)],
    bg: bool,
) -> (serde_json::Value, Option<serde_json::Value>) {
    let background = bg.then(|| {
        let mut c = s.command(&["bg", "16384", "100"], shim);
        c.envs(env.iter().copied())
            .env("XSCHED_PRIORITY", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().expect("background starts");
        // Wait for its first line: it is running.
        let mut first = [0u8; 1];
        let stdout = child.stdout.as_mut().expect("stdout");
        std::io::Read::read_exact(stdout, &mut first).expect("background started");
        child
    });
    let fg = s.run(
        &["fg", "16384", "100", "6000", "60"],
        shim,
        &[env, &[("XSCHED_PRIORITY", "10")]].concat(),
    );
    let bg = background.map(|child| {
        let pid = child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(killed.is_ok_and(|k| k.success()));
        let out = child.wait_with_output().expect("background ends");
        assert!(out.status.success(), "background failed");
        json(&out.stdout)
    });
    (json(&fg.stdout), bg)
}

#[test]
fn foreground_and_background_processes_under_the_daemon() {
    let Some(s) = setup() else { return };
    let sock = std::env::temp_dir().join(format!("xsched-ocl-{}.sock", std::process::id()));
    let daemon = xsched_daemon::Daemon::bind(&sock, &xsched_daemon::PolicySpec::default())
        .expect("daemon binds")
        .spawn()
        .expect("daemon runs");
    let path = sock.to_str().expect("utf-8 path");
    let global = [("XSCHED_SCHEDULER", "global"), ("XSCHED_SOCKET", path)];
    let (alone, _) = fg_beside(&s, false, &[], false);
    let (native, native_bg) = fg_beside(&s, false, &[], true);
    let (shimmed, shimmed_bg) = fg_beside(&s, true, &global, true);
    daemon.stop();
    for run in [&native, &shimmed] {
        assert_eq!(
            run["checksum"], alone["checksum"],
            "same results in every mode"
        );
        assert_eq!(run["requests"], 60);
    }
    for bg in [native_bg, shimmed_bg] {
        let bg = bg.expect("background ran");
        assert!(bg["kernels"].as_u64() > Some(0), "{bg}");
    }
    // Timing is measured by scripts/bench-opencl.py (the benchmark record); here it is reported.
    let p99 = |v: &serde_json::Value| v["p99_us"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "fg P99: standalone {:.0} us, native {:.2}x, shim+daemon {:.2}x",
        p99(&alone),
        p99(&native) / p99(&alone),
        p99(&shimmed) / p99(&alone)
    );
}

#[test]
fn forked_children_start_clean_and_exec_registers_one_agent() {
    let Some(s) = setup() else { return };
    forks::check("opencl", |mode, socket| {
        let mut c = s.command(&["fork", "4096", "20", "800", mode], true);
        c.env("XSCHED_SCHEDULER", "global")
            .env("XSCHED_SOCKET", socket)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the test program starts")
    });
}

#[test]
fn a_daemon_that_hangs_up_never_raises_sigpipe_in_the_host_program() {
    use std::os::unix::net::UnixListener;
    use std::os::unix::process::ExitStatusExt;
    use xsched_proto::{ClientMsg, DaemonMsg, VERSION, read_frame, write_frame};
    let Some(s) = setup() else { return };
    // A "daemon" that welcomes each client, reads one frame, and hangs up: every later write
    // of the client's agent meets a closed socket. The C program keeps SIGPIPE's default
    // disposition (terminate).
    let sock = std::env::temp_dir().join(format!("xsched-ocl-pipe-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let hangups = std::thread::spawn(move || {
        let mut served = 0u32;
        while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((mut c, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            let _ = c.set_nonblocking(false);
            if matches!(
                read_frame::<ClientMsg>(&mut c),
                Ok(Some(ClientMsg::Hello { .. }))
            ) {
                let _ = write_frame(&mut c, &DaemonMsg::Welcome { version: VERSION });
                let _ = read_frame::<ClientMsg>(&mut c);
                served += 1;
            }
        }
        served
    });
    let path = sock.to_str().expect("utf-8 path");
    let mut c = s.command(&["hold", "4096", "20", "1500"], true);
    let out = c
        .env("XSCHED_SCHEDULER", "global")
        .env("XSCHED_SOCKET", path)
        .output()
        .expect("the test program runs");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let served = hangups.join().expect("the hanging-up daemon");
    assert_eq!(
        out.status.signal(),
        None,
        "the host program was killed by signal {:?}: {}",
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        served >= 2,
        "the agent reconnected after each hang-up ({served} connections)"
    );
}

/// `XSCHED_STAMPS` (what `scripts/bench-opencl.py --demotion` pairs): the foreground's Ready
/// and its agent's forwarding are stamped, and the background's device threads are demoted
/// after a foreground Ready and restored after, each stamp naming its process.
#[test]
fn stamps_show_a_foreground_ready_followed_by_the_background_demoted() {
    let Some(s) = setup() else { return };
    let dir = std::env::temp_dir();
    let sock = dir.join(format!("xsched-ocl-stamps-{}.sock", std::process::id()));
    let stamps = dir.join(format!("xsched-ocl-stamps-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&stamps);
    let daemon = xsched_daemon::Daemon::bind(&sock, &xsched_daemon::PolicySpec::default())
        .expect("daemon binds")
        .spawn()
        .expect("daemon runs");
    let env = [
        ("XSCHED_SCHEDULER", "global"),
        ("XSCHED_SOCKET", sock.to_str().expect("utf-8 path")),
        ("XSCHED_STAMPS", stamps.to_str().expect("utf-8 path")),
    ];
    let (fg, bg) = fg_beside(&s, true, &env, true);
    daemon.stop();
    assert_eq!(fg["requests"], 60);
    assert!(bg.is_some_and(|b| b["kernels"].as_u64() > Some(0)));
    let text = std::fs::read_to_string(&stamps).expect("stamps written");
    let _ = std::fs::remove_file(&stamps);
    let lines: Vec<(&str, u32, u64)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l:?}");
            (f[0], f[1].parse().expect("pid"), f[2].parse().expect("ns"))
        })
        .collect();
    let pids = |what: &str| -> Vec<u32> {
        let mut p: Vec<u32> = lines.iter().filter(|l| l.0 == what).map(|l| l.1).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    assert_eq!(
        pids("ready").len(),
        2,
        "both processes' queues turn ready: {text}"
    );
    assert_eq!(
        pids("ready-sent").len(),
        2,
        "both agents forward Ready: {text}"
    );
    // The programs run as this process does, so the backend's answer here is theirs.
    if !xsched_backend_opencl::demotion_available() {
        eprintln!(
            "skipped the demotion stamps: neither CAP_SYS_NICE nor RLIMIT_NICE to undo one, so \
             no Level 2 here"
        );
        return;
    }
    let bg_pid = pids("demoted");
    assert_eq!(bg_pid.len(), 1, "only the background is demoted: {text}");
    assert_eq!(pids("restored"), bg_pid, "and restored");
    let first_fg_ready = lines
        .iter()
        .filter(|l| l.0 == "ready" && l.1 != bg_pid[0])
        .map(|l| l.2)
        .min()
        .expect("a foreground Ready");
    assert!(
        lines
            .iter()
            .any(|l| l.0 == "demoted" && l.2 > first_fg_ready),
        "a demotion after the foreground's Ready: {text}"
    );
}
