//! The daemon shared with clients that misbehave, each test one kind: a 1 ns time slice,
//! 2 000 silent connections, a client that never reads, a SIGSTOPped daemon, clients of another
//! protocol version, and a client of another user trying to switch the policy or a process's
//! mode (that user runs a staged copy of `xsched`: [`support::Nobody`]). In each, an
//! operator's `xsched top --once` answers in time (the figure is printed) and two real worker
//! processes are still scheduled: the high-priority one runs while the low one is suspended,
//! and both complete every command.

mod support;

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Daemon, XSCHED, finished, row_of, socket, timed_top, top, wait_for, worker};
use xsched_proto::{ClientMsg, DaemonMsg, WireHint, WireHints, client, read_frame, write_frame};

const WAIT: Duration = Duration::from_secs(5);

/// A low- and a high-priority worker: the low one is suspended while the high one has work,
/// and both complete all their commands.
fn still_scheduling(sock: &Path) {
    let bg = worker(sock, 0, 2000, 400);
    let bg_pid = bg.id();
    wait_for(
        || row_of(&top(sock), bg_pid).is_some(),
        "the low worker registered",
    );
    let fg = worker(sock, 10, 2000, 100);
    let fg_pid = fg.id();
    wait_for(
        || {
            let rows = top(sock);
            row_of(&rows, fg_pid).is_some_and(|r| r["ready"] == true)
                && row_of(&rows, bg_pid).is_some_and(|r| r["suspended"] == true)
        },
        "the low worker suspended while the high one runs",
    );
    assert_eq!(finished(fg)["completed"], 100);
    assert_eq!(finished(bg)["completed"], 400);
}

fn register(s: &mut UnixStream, queue: u32, hints: WireHints) {
    write_frame(
        s,
        &ClientMsg::Register {
            queue,
            device: 0,
            hints,
        },
    )
    .expect("register");
}

#[test]
fn a_one_nanosecond_time_slice_is_refused_and_stalls_nobody() {
    let sock = socket("hostile-slice");
    let _daemon = Daemon::start_with(&sock, &["--policy", "bandwidth"]);
    let mut hostile = client::connect(&sock, WAIT).expect("connect");
    register(
        &mut hostile,
        0,
        WireHints {
            time_slice_ns: Some(1),
            ..WireHints::default()
        },
    );
    let why = client::request(&mut hostile, &ClientMsg::GetPolicy).expect_err("refused");
    assert!(why.to_string().contains("at least 100 us"), "{why}");
    let _ = read_frame::<DaemonMsg>(&mut hostile); // the GetPolicy answer
    register(&mut hostile, 1, WireHints::default());
    write_frame(&mut hostile, &ClientMsg::Ready { queue: 1 }).expect("ready");
    write_frame(
        &mut hostile,
        &ClientMsg::Hint {
            queue: 1,
            hint: WireHint::TimeSliceNs(1),
        },
    )
    .expect("hint");
    let why = client::request(&mut hostile, &ClientMsg::GetPolicy).expect_err("refused");
    assert!(why.to_string().contains("at least 100 us"), "{why}");
    eprintln!("1 ns slice: top answered in {:?}", timed_top(&sock));
    drop(hostile);
    let set = Command::new(XSCHED)
        .args(["policy", "--socket"])
        .arg(&sock)
        .args(["set", "hpf"])
        .status()
        .expect("policy set");
    assert!(
        set.success(),
        "the daemon still takes the operator's requests"
    );
    still_scheduling(&sock);
}

#[test]
fn two_thousand_silent_connections_keep_out_nobody() {
    let sock = socket("hostile-silent");
    let _daemon = Daemon::start(&sock);
    let silent: Vec<UnixStream> = (0..2000)
        .map(|_| UnixStream::connect(&sock).expect("connect"))
        .collect();
    eprintln!(
        "2000 silent connections: top answered in {:?}",
        timed_top(&sock)
    );
    still_scheduling(&sock);
    drop(silent);
}

#[test]
fn a_client_that_never_reads_delays_nobody() {
    let sock = socket("hostile-deaf");
    let _daemon = Daemon::start(&sock);
    let mut deaf = client::connect(&sock, WAIT).expect("connect");
    register(&mut deaf, 0, WireHints::default());
    register(
        &mut deaf,
        1,
        WireHints {
            priority: 10,
            ..WireHints::default()
        },
    );
    write_frame(&mut deaf, &ClientMsg::Ready { queue: 0 }).expect("ready");
    // Each Ready/Idle of the high queue makes operations for the low one; none is read.
    let flood = std::thread::spawn(move || {
        for i in 0..2_000_000u32 {
            let queue = 1;
            let msg = if i % 2 == 0 {
                ClientMsg::Ready { queue }
            } else {
                ClientMsg::Idle { queue }
            };
            if write_frame(&mut deaf, &msg).is_err() {
                return true;
            }
        }
        false
    });
    eprintln!(
        "a client that never reads: top answered in {:?}",
        timed_top(&sock)
    );
    still_scheduling(&sock);
    assert!(
        flood.join().expect("flood"),
        "the daemon cut off the client that never read"
    );
}

#[test]
fn a_stopped_daemon_releases_its_clients_and_takes_them_back() {
    let sock = socket("hostile-stop");
    let daemon = Daemon::start(&sock);
    let bg = worker(&sock, 0, 2000, 300);
    let bg_pid = bg.id();
    wait_for(|| row_of(&top(&sock), bg_pid).is_some(), "bg registered");
    let mut fg = worker(&sock, 10, 2000, 1_000_000);
    let fg_pid = fg.id();
    wait_for(
        || row_of(&top(&sock), bg_pid).is_some_and(|r| r["suspended"] == true),
        "bg suspended by fg",
    );
    daemon.signal("STOP");
    let stopped = Instant::now();
    // bg's agent gives up on the silent daemon and runs bg unscheduled: it finishes.
    let bg_done = finished(bg);
    let bg_took = stopped.elapsed();
    assert_eq!(bg_done["completed"], 300);
    eprintln!(
        "stopped daemon: the suspended worker finished its 300 commands (0.6 s of kernels, \
         sharing the device with fg) {bg_took:?} after SIGSTOP"
    );
    // What it needs: the agent's give-up (designed: 750 ms) and 0.6 s of kernels at half the
    // device beside fg, about 2 s. An agent that never gave up would leave it suspended for
    // good (`finished` would never return); 20 s is 10 times what it needs.
    assert!(
        bg_took < Duration::from_secs(20),
        "the suspended worker finished only {bg_took:?} after SIGSTOP"
    );
    // The operator's top cannot be answered, but it says so in time rather than hanging.
    let started = Instant::now();
    let refused = support::top_by(Command::new(XSCHED), &sock).expect_err("no answer");
    let gave_up = started.elapsed();
    // top gives up at its own answer timeout (5 s); beyond that it needs only to start (a few
    // ms). 15 s leaves the start 10 s, over 100 times what it needs; a top that hung would
    // never return (nextest's timeout would end it).
    assert!(
        gave_up < Duration::from_secs(15),
        "top hung for {gave_up:?}"
    );
    assert!(refused.contains("did not answer"), "{refused}");
    eprintln!(
        "stopped daemon: top gave up after {gave_up:?}: {}",
        refused.trim()
    );
    daemon.signal("CONT");
    wait_for(
        || row_of(&top(&sock), fg_pid).is_some(),
        "fg registered again after SIGCONT",
    );
    eprintln!("after SIGCONT: top answered in {:?}", timed_top(&sock));
    let _ = fg.kill();
    let _ = fg.wait();
    still_scheduling(&sock);
}

#[test]
fn clients_of_another_protocol_version_are_told_and_disturb_nobody() {
    let sock = socket("hostile-version");
    let _daemon = Daemon::start(&sock);
    for _ in 0..50 {
        let mut old = UnixStream::connect(&sock).expect("connect");
        old.set_read_timeout(Some(WAIT)).expect("timeout");
        write_frame(&mut old, &ClientMsg::Hello { version: 2 }).expect("hello");
        match read_frame::<DaemonMsg>(&mut old) {
            Ok(Some(DaemonMsg::Error { message })) => {
                assert!(message.contains("version 2 unsupported"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    eprintln!(
        "50 version-2 clients: top answered in {:?}",
        timed_top(&sock)
    );
    still_scheduling(&sock);
}

#[test]
fn a_client_of_another_user_may_not_switch_the_policy_or_see_others() {
    if !support::is_root() {
        eprintln!("skipped: running a client as another user needs root (CI runs as root)");
        return;
    }
    // A directory and socket the other user can reach; the authority defaults stay.
    let nobody = support::Nobody::stage();
    let config = nobody.dir().join("daemon.toml");
    std::fs::write(&config, "[socket]\nmode = 0o666\n").expect("config");
    let sock = nobody.dir().join("xsched.sock");
    let config_arg = config.to_string_lossy().into_owned();
    let _daemon = Daemon::start_with(&sock, &["--config", &config_arg]);
    let bg = worker(&sock, 0, 2000, 400);
    wait_for(|| row_of(&top(&sock), bg.id()).is_some(), "bg registered");
    let out = nobody
        .xsched()
        .args(["policy", "--socket"])
        .arg(&sock)
        .args(["set", "bandwidth"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "uid 65534 switched the policy");
    assert!(
        stderr.contains("setting the policy refused") && stderr.contains("uid 65534"),
        "{stderr}"
    );
    let out = nobody
        .xsched()
        .args([
            "mode",
            "set",
            "--pid",
            &bg.id().to_string(),
            "observe",
            "--socket",
        ])
        .arg(&sock)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "uid 65534 switched root's mode");
    assert!(
        stderr.contains(&format!(
            "process {} has no such queues you may see",
            bg.id()
        )),
        "{stderr}"
    );
    let theirs = support::top_by(nobody.xsched(), &sock).expect("top as uid 65534");
    assert_eq!(
        theirs["rows"].as_array().map(Vec::len),
        Some(0),
        "uid 65534 sees no other user's queues"
    );
    assert_eq!(theirs["policy"], "hpf", "the policy is unchanged");
    eprintln!(
        "another uid refused: top answered in {:?}",
        timed_top(&sock)
    );
    assert_eq!(finished(bg)["completed"], 400);
    still_scheduling(&sock);
}

#[test]
fn an_agent_obeys_no_daemon_of_another_user_unless_told_to() {
    if !support::is_root() {
        eprintln!("skipped: running a daemon as another user needs root (CI runs as root)");
        return;
    }
    // An "impostor" daemon of uid 65534 in a directory of its own.
    let nobody = support::Nobody::stage();
    let dir = nobody.dir().join("impostor");
    std::fs::create_dir(&dir).expect("dir");
    std::os::unix::fs::chown(&dir, Some(support::Nobody::UID), Some(support::Nobody::UID))
        .expect("chown");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let sock = dir.join("xsched.sock");
    let _daemon = Daemon::start_by(nobody.xsched(), &sock, &[]);
    // A root client does not obey it: it never registers, and runs unscheduled to the end.
    let w = support::worker_with(&sock, 0, 1000, 600, &[]);
    let pid = w.id();
    let until = Instant::now() + Duration::from_millis(400);
    while Instant::now() < until {
        assert!(
            row_of(&top(&sock), pid).is_none(),
            "the client registered with another user's daemon"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(finished(w)["completed"], 600);
    // Told to trust that user (a dedicated daemon account), it registers.
    let w = support::worker_with(&sock, 0, 1000, 600, &[("XSCHED_DAEMON_UID", "65534")]);
    let pid = w.id();
    wait_for(
        || row_of(&top(&sock), pid).is_some(),
        "the trusting client registered",
    );
    assert_eq!(finished(w)["completed"], 600);
}
