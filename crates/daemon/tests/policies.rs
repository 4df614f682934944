//! Choosing a policy through the daemon: what it refuses and why, with the connection kept.

use std::os::unix::net::UnixStream;
use std::time::Duration;
use xsched_core::{Hint, Nanos, QueueHints};
use xsched_daemon::Daemon;
use xsched_proto::{ClientMsg, DaemonMsg, VERSION, read_frame, write_frame};

fn client(socket: &std::path::Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).expect("daemon");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write_frame(&mut s, &ClientMsg::Hello { version: VERSION }).expect("hello");
    assert!(matches!(
        read_frame::<DaemonMsg>(&mut s),
        Ok(Some(DaemonMsg::Welcome { .. }))
    ));
    s
}

/// Send `msg` and return the next answer that is not an operation.
fn ask(s: &mut UnixStream, msg: &ClientMsg) -> DaemonMsg {
    write_frame(s, msg).expect("send");
    loop {
        match read_frame::<DaemonMsg>(s).expect("answer") {
            Some(
                DaemonMsg::Suspend { .. } | DaemonMsg::Resume { .. } | DaemonMsg::Protect { .. },
            ) => {}
            Some(answer) => return answer,
            None => panic!("the daemon closed the connection"),
        }
    }
}

#[test]
fn slo_aware_needs_a_queue_with_an_slo_and_unknown_names_are_refused() {
    let socket = std::env::temp_dir().join(format!("xsched-policies-{}.sock", std::process::id()));
    let daemon = Daemon::bind(&socket, "hpf")
        .expect("bind")
        .spawn()
        .expect("serve");
    let mut c = client(&socket);
    write_frame(
        &mut c,
        &ClientMsg::Register {
            queue: 0,
            device: 0,
            hints: QueueHints::default(),
        },
    )
    .expect("register");
    let set = |name: &str| ClientMsg::SetPolicy { name: name.into() };
    match ask(&mut c, &set("slo-aware")) {
        DaemonMsg::Error { message } => {
            assert!(
                message.contains("SLO") && message.contains("XSCHED_SLO_US"),
                "{message}"
            )
        }
        other => panic!("slo-aware without an SLO queue was accepted: {other:?}"),
    }
    match ask(&mut c, &set("nope")) {
        DaemonMsg::Error { message } => assert!(message.contains("slo-aware"), "{message}"),
        other => panic!("an unknown policy was accepted: {other:?}"),
    }
    assert_eq!(
        ask(&mut c, &ClientMsg::GetPolicy),
        DaemonMsg::Policy { name: "hpf".into() },
        "nothing changed, and the connection stays"
    );
    let slo = Hint::Slo(Nanos::from_ms(10));
    write_frame(
        &mut c,
        &ClientMsg::Hint {
            queue: 0,
            hint: slo,
        },
    )
    .expect("hint");
    assert_eq!(
        ask(&mut c, &set("slo-aware")),
        DaemonMsg::Policy {
            name: "slo-aware".into()
        }
    );
    daemon.stop();
}
