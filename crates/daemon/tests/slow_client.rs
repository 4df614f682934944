//! A client that stops reading its operations holds up nobody: operations are written after the
//! scheduler's lock, without blocking, and the client is disconnected once it is far behind.

use std::io::Read;
use std::time::{Duration, Instant};
use xsched_daemon::Daemon;
use xsched_proto::{ClientMsg, DaemonMsg, WireHints, client, write_frame};

#[test]
fn a_client_that_never_reads_is_cut_off_and_others_are_answered() {
    let socket = std::env::temp_dir().join(format!("xsched-slow-{}.sock", std::process::id()));
    let daemon = Daemon::bind(&socket, &xsched_core::PolicySpec::default())
        .expect("bind")
        .spawn()
        .expect("serve");
    let mut deaf = client::connect(&socket, Duration::from_secs(5)).expect("deaf client");
    let high = WireHints {
        priority: 10,
        ..WireHints::default()
    };
    for (queue, hints) in [(0, WireHints::default()), (1, high)] {
        write_frame(
            &mut deaf,
            &ClientMsg::Register {
                queue,
                device: 0,
                hints,
            },
        )
        .expect("register");
    }
    write_frame(&mut deaf, &ClientMsg::Ready { queue: 0 }).expect("ready");
    // Every Ready/Idle pair of the high queue makes operations for the low one (and for the
    // high one's protection); the deaf client never reads them.
    let mut other = client::connect(&socket, Duration::from_secs(5)).expect("other client");
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut cut_off = false;
    for i in 0..200_000u32 {
        let msg = if i % 2 == 0 {
            ClientMsg::Ready { queue: 1 }
        } else {
            ClientMsg::Idle { queue: 1 }
        };
        if write_frame(&mut deaf, &msg).is_err() {
            cut_off = true;
            break;
        }
        if i % 20_000 == 0 {
            let t = Instant::now();
            let answer = client::request(&mut other, &ClientMsg::GetPolicy).expect("answered");
            assert_eq!(answer, DaemonMsg::Policy { name: "hpf".into() });
            slowest = slowest.max(t.elapsed());
        }
        if start.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    if !cut_off {
        // The daemon shut the connection: reading drains what it wrote, then ends.
        deaf.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut sink = Vec::new();
        let _ = deaf.read_to_end(&mut sink);
        cut_off = write_frame(&mut deaf, &ClientMsg::Idle { queue: 1 }).is_err()
            || deaf.read(&mut [0u8; 1]).map_or(true, |n| n == 0);
    }
    assert!(cut_off, "the client that never read was disconnected");
    eprintln!("while a client never read, another's slowest answer took {slowest:?}");
    // A daemon that blocked on the deaf client's full socket would answer nobody again (the
    // loop above gives up after 60 s); one that does not answers in milliseconds (a few ms
    // here, tens under a full test run on two cores). 10 s is over 100 times that.
    assert!(
        slowest < Duration::from_secs(10),
        "another client waited {slowest:?} for an answer"
    );
    daemon.stop();
}
