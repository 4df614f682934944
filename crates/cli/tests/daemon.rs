//! The daemon with real client processes running real CPU-device kernels: suspension across
//! processes, a killed client releasing its queues, a daemon restart losing no command, bad
//! frames closing only their connection, and `xsched top --once --json`.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

mod support;

use support::{Daemon, finished, row_of, socket, top, wait_for, worker};

#[test]
fn background_process_is_suspended_while_the_foreground_has_work_and_resumed_after() {
    let sock = socket("suspend");
    let _daemon = Daemon::start(&sock);
    let bg = worker(&sock, 0, 2000, 800);
    let bg_pid = bg.id();
    wait_for(
        || row_of(&top(&sock), bg_pid).is_some_and(|r| r["ready"] == true),
        "bg ready",
    );
    // Clients report their queues' statistics about once a second.
    wait_for(
        || row_of(&top(&sock), bg_pid).is_some_and(|r| r["completed"].as_u64() > Some(0)),
        "the background's completed count in top",
    );
    let fg = worker(&sock, 10, 2000, 150);
    let fg_pid = fg.id();
    wait_for(
        || {
            let rows = top(&sock);
            let fg_running = row_of(&rows, fg_pid).is_some_and(|r| r["ready"] == true);
            let bg_suspended = row_of(&rows, bg_pid).is_some_and(|r| r["suspended"] == true);
            fg_running && bg_suspended
        },
        "the background to be suspended while the foreground runs",
    );
    assert_eq!(finished(fg)["completed"], 150);
    wait_for(
        || {
            let rows = top(&sock);
            row_of(&rows, fg_pid).is_none()
                && row_of(&rows, bg_pid).is_some_and(|r| r["suspended"] == false)
        },
        "the background to resume after the foreground",
    );
    assert_eq!(finished(bg)["completed"], 800);
}

#[test]
fn a_killed_client_releases_its_queues() {
    let sock = socket("kill");
    let _daemon = Daemon::start(&sock);
    let bg = worker(&sock, 0, 2000, 300);
    let bg_pid = bg.id();
    wait_for(|| row_of(&top(&sock), bg_pid).is_some(), "bg registered");
    let mut fg = worker(&sock, 10, 2000, 100_000);
    let fg_pid = fg.id();
    wait_for(
        || row_of(&top(&sock), bg_pid).is_some_and(|r| r["suspended"] == true),
        "the background to be suspended",
    );
    fg.kill().expect("SIGKILL the foreground");
    let _ = fg.wait();
    wait_for(
        || {
            let rows = top(&sock);
            row_of(&rows, fg_pid).is_none()
                && row_of(&rows, bg_pid).is_some_and(|r| r["suspended"] == false)
        },
        "the dead foreground's queues to be released",
    );
    assert_eq!(finished(bg)["completed"], 300);
}

#[test]
fn restarting_the_daemon_mid_run_loses_no_command() {
    let sock = socket("restart");
    let daemon = Daemon::start(&sock);
    let w = worker(&sock, 0, 1000, 600);
    let pid = w.id();
    wait_for(|| row_of(&top(&sock), pid).is_some(), "worker registered");
    drop(daemon);
    std::thread::sleep(Duration::from_millis(100));
    let _daemon = Daemon::start(&sock);
    wait_for(
        || row_of(&top(&sock), pid).is_some(),
        "worker re-registered",
    );
    let result = finished(w);
    assert_eq!(result["completed"], 600);
    assert_eq!(result["failed"], 0);
}

/// What the daemon says on a connection before it closes it: the message of its one `Error`
/// frame, or `None` if it closes without a word. (The test process is a Rust program: a write
/// to the closed connection cannot raise SIGPIPE here.)
fn said_before_closing(s: &UnixStream) -> Option<String> {
    let mut said = None;
    loop {
        match xsched_proto::read_frame::<xsched_proto::DaemonMsg>(&mut &*s) {
            Ok(Some(xsched_proto::DaemonMsg::Error { message })) => {
                assert!(said.is_none(), "one reason, then the end");
                said = Some(message);
            }
            Ok(Some(other)) => panic!("unexpected {other:?}"),
            Ok(None) => return said,
            // Closing with unread bytes of ours in its buffer resets the connection.
            Err(xsched_proto::ProtoError::Io(e))
                if e.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                return said;
            }
            Err(e) => panic!("the daemon must close cleanly after its reason: {e}"),
        }
    }
}

#[test]
fn garbage_and_truncated_frames_close_only_their_connection() {
    let sock = socket("garbage");
    let _daemon = Daemon::start(&sock);
    let bg = worker(&sock, 0, 1000, 200);
    let bg_pid = bg.id();
    wait_for(
        || row_of(&top(&sock), bg_pid).is_some(),
        "worker registered",
    );
    for (bytes, why) in [
        (&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3][..], "exceeds"), // length beyond the limit
        (&[5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff], "malformed"), // not a message
        (&[9, 0, 0, 0, 0], "no handshake"),                  // truncated, then hang up
    ] {
        let s = UnixStream::connect(&sock).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        (&s).write_all(bytes).expect("write");
        if why == "no handshake" {
            s.shutdown(std::net::Shutdown::Write).expect("half-close");
        }
        let said = said_before_closing(&s).unwrap_or_default();
        assert!(
            said.contains(why),
            "a bad first frame is answered with its reason ({why}), then the connection closes: {said:?}"
        );
    }
    // After a good handshake too.
    let s = UnixStream::connect(&sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    xsched_proto::write_frame(
        &mut &s,
        &xsched_proto::ClientMsg::Hello {
            version: xsched_proto::VERSION,
        },
    )
    .expect("hello");
    let welcome = xsched_proto::read_frame::<xsched_proto::DaemonMsg>(&mut &s).expect("welcome");
    assert!(matches!(
        welcome,
        Some(xsched_proto::DaemonMsg::Welcome { .. })
    ));
    (&s).write_all(&[4, 0, 0, 0, 0xee, 0xee, 0xee, 0xee])
        .expect("garbage");
    let why = said_before_closing(&s).expect("a reason");
    assert!(why.contains("malformed"), "{why}");
    assert!(
        row_of(&top(&sock), bg_pid).is_some(),
        "other clients unaffected"
    );
    assert_eq!(finished(bg)["completed"], 200);
}
