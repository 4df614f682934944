//! Choosing a policy through the daemon: what it refuses and why, with the connection kept.

use std::os::unix::net::UnixStream;
use std::time::Duration;
use xsched_daemon::Daemon;
use xsched_proto::{ClientMsg, DaemonMsg, WireHint, WireHints, write_frame};
use xsched_proto::{ProtoError, client};

/// Send `msg` and return the answer, or the daemon's refusal as `Error`.
fn ask(s: &mut UnixStream, msg: &ClientMsg) -> DaemonMsg {
    match client::request(s, msg) {
        Ok(answer) => answer,
        Err(ProtoError::Refused(message)) => DaemonMsg::Error { message },
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn slo_aware_needs_a_queue_with_an_slo_and_unknown_names_are_refused() {
    let socket = std::env::temp_dir().join(format!("xsched-policies-{}.sock", std::process::id()));
    let daemon = Daemon::bind(&socket, &xsched_core::PolicySpec::default())
        .expect("bind")
        .spawn()
        .expect("serve");
    let mut c = client::connect(&socket, Duration::from_secs(5)).expect("daemon");
    write_frame(
        &mut c,
        &ClientMsg::Register {
            queue: 0,
            device: 0,
            hints: WireHints::default(),
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
    // The same error as every other entry (env, command line, C API): the core's, naming the
    // known policies.
    let unknown = "nope"
        .parse::<xsched_core::PolicySpec>()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(unknown.contains("known: fcfs"), "{unknown}");
    match ask(&mut c, &set("nope")) {
        DaemonMsg::Error { message } => assert_eq!(message, unknown),
        other => panic!("an unknown policy was accepted: {other:?}"),
    }
    assert_eq!(
        ask(&mut c, &ClientMsg::GetPolicy),
        DaemonMsg::Policy { name: "hpf".into() },
        "nothing changed, and the connection stays"
    );
    let slo = WireHint::SloNs(10_000_000);
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
