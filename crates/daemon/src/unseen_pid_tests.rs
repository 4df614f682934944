//! Clients the daemon cannot see: `SO_PEERCRED` gives pid 0 for a peer in a PID namespace that
//! is not the daemon's or below it (a pod's, when the daemon has a namespace of its own). Every
//! such client has the same pid, so a pid names none of them: they are scheduled and shown as
//! any other, authority goes by their uid as always, but an operator's `--pid 0` is refused
//! rather than acting on all of them at once.

use crate::config::DaemonConfig;
use crate::fuzz_tests::{drain, join};
use crate::peer::Peer;
use crate::shared::DaemonState;
use xsched_core::PolicySpec;
use xsched_proto::{ClientMsg, DaemonMsg, WireHint, WireHints, WireRolloutMode};

fn unseen(uid: u32) -> Peer {
    Peer {
        pid: 0,
        uid,
        gids: vec![uid],
        name: "?".into(),
    }
}

#[test]
fn clients_with_pid_zero_are_scheduled_but_no_operator_can_name_them_by_pid() {
    let shared =
        DaemonState::new(PolicySpec::default().build(), &DaemonConfig::default()).expect("shared");
    let admission = shared.admission.clone();
    let (a_uid, b_uid) = (2_000_011, 2_000_012);
    let a = join(&shared, &admission, 1, unseen(a_uid));
    let b = join(&shared, &admission, 2, unseen(b_uid));
    let root = join(
        &shared,
        &admission,
        3,
        Peer {
            pid: 300,
            uid: 0,
            gids: vec![0],
            name: "xsched".into(),
        },
    );
    let send = |client: &crate::fuzz_tests::Client<'_>, msg: ClientMsg| {
        client.session.as_ref().expect("connected").handle(msg)
    };
    let register = |priority| ClientMsg::Register {
        queue: 1,
        device: 0,
        hints: WireHints {
            priority,
            ..WireHints::default()
        },
    };
    assert_eq!(send(&a, register(10)), None, "a registered");
    assert_eq!(send(&b, register(0)), None, "b registered");

    // Authority still goes by uid: a priority outside the default range is refused.
    match send(
        &a,
        ClientMsg::Hint {
            queue: 1,
            hint: WireHint::Priority(1000),
        },
    ) {
        Some(DaemonMsg::Error { message }) => assert!(message.contains("-100..=100"), "{message}"),
        other => panic!("an unseen client used priority 1000: {other:?}"),
    }

    // `top` shows both, each with pid 0 and its own uid and priority.
    let top = || -> Vec<(u32, u32, i32)> {
        let rows = match send(&root, ClientMsg::Top { from: 0 }) {
            Some(DaemonMsg::Top { rows, .. }) => rows,
            other => panic!("no top: {other:?}"),
        };
        let mut seen: Vec<_> = rows
            .iter()
            .map(|r| (r.pid, r.uid, r.hints.priority))
            .collect();
        seen.sort_unstable();
        seen
    };
    assert_eq!(top(), [(0, a_uid, 10), (0, b_uid, 0)]);

    // Root may hint and switch anyone, but `--pid 0` names no one: refused, nothing changed.
    let _ = (drain(&a), drain(&b));
    for msg in [
        ClientMsg::HintProcess {
            pid: 0,
            queue: None,
            hint: WireHint::Priority(50),
        },
        ClientMsg::SetMode {
            pid: 0,
            queue: Some(1),
            mode: WireRolloutMode::Observe,
        },
    ] {
        match send(&root, msg) {
            Some(DaemonMsg::Error { message }) => {
                assert!(message.contains("pid 0 names no one process"), "{message}");
                assert!(message.contains("hostPID"), "{message}");
            }
            other => panic!("pid 0 was acted on: {other:?}"),
        }
    }
    assert_eq!(top(), [(0, a_uid, 10), (0, b_uid, 0)], "a priority changed");
    let switched: Vec<_> = [drain(&a), drain(&b)]
        .into_iter()
        .flatten()
        .filter(|m| matches!(m, DaemonMsg::SetMode { .. }))
        .collect();
    assert_eq!(switched, [], "a refused switch reached a client");
}
