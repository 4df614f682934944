//! The encoding of every message, pinned per protocol version. A change to any message's bytes
//! fails here until `VERSION` is bumped and the new version's golden file is written
//! (`XSCHED_BLESS=1 cargo test -p xsched-proto --test golden`); an existing version's file is
//! never rewritten, so a format change cannot be blessed in under an old version number.

use std::fmt::Write as _;
use std::path::PathBuf;
use xsched_proto::{
    ClientMsg, DaemonMsg, QueueStats, TopRow, VERSION, WireHint, WireHints, write_frame,
};

/// The name of a client message's variant: the match makes a new variant a compile error here
/// until it has a sample below.
fn client_name(m: &ClientMsg) -> &'static str {
    match m {
        ClientMsg::Hello { .. } => "client.hello",
        ClientMsg::Register { .. } => "client.register",
        ClientMsg::Ready { .. } => "client.ready",
        ClientMsg::Idle { .. } => "client.idle",
        ClientMsg::Hint { .. } => "client.hint",
        ClientMsg::Unregister { .. } => "client.unregister",
        ClientMsg::GetPolicy => "client.get-policy",
        ClientMsg::SetPolicy { .. } => "client.set-policy",
        ClientMsg::HintProcess { .. } => "client.hint-process",
        ClientMsg::Top => "client.top",
        ClientMsg::Stats { .. } => "client.stats",
    }
}

fn daemon_name(m: &DaemonMsg) -> &'static str {
    match m {
        DaemonMsg::Welcome { .. } => "daemon.welcome",
        DaemonMsg::Suspend { .. } => "daemon.suspend",
        DaemonMsg::Resume { .. } => "daemon.resume",
        DaemonMsg::Policy { .. } => "daemon.policy",
        DaemonMsg::Top { .. } => "daemon.top",
        DaemonMsg::Error { .. } => "daemon.error",
        DaemonMsg::Done => "daemon.done",
        DaemonMsg::Protect { .. } => "daemon.protect",
    }
}

fn hints() -> WireHints {
    WireHints {
        priority: -2,
        share: 3,
        time_slice_ns: Some(5_000_000),
        laxity_ns: None,
        deadline_ns: Some(7),
        slo_ns: Some(11_000_000),
    }
}

fn stats() -> QueueStats {
    QueueStats {
        in_flight: 4,
        completed: 99,
        recent_p99_us: 812.5,
    }
}

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let client = [
        ClientMsg::Hello { version: VERSION },
        ClientMsg::Register {
            queue: 1,
            device: 2,
            hints: hints(),
        },
        ClientMsg::Ready { queue: 1 },
        ClientMsg::Idle { queue: 1 },
        ClientMsg::Hint {
            queue: 1,
            hint: WireHint::SloNs(9_000_000),
        },
        ClientMsg::Unregister { queue: 1 },
        ClientMsg::GetPolicy,
        ClientMsg::SetPolicy {
            name: "slo-aware".into(),
        },
        ClientMsg::HintProcess {
            pid: 4242,
            queue: Some(3),
            hint: WireHint::Priority(-1),
        },
        ClientMsg::Top,
        ClientMsg::Stats {
            queue: 1,
            stats: stats(),
        },
    ];
    let daemon = [
        DaemonMsg::Welcome { version: VERSION },
        DaemonMsg::Suspend { queue: 1 },
        DaemonMsg::Resume { queue: 1 },
        DaemonMsg::Policy { name: "hpf".into() },
        DaemonMsg::Top {
            rows: vec![TopRow {
                pid: 4242,
                process: "infer".into(),
                device: 0,
                queue: 1,
                hints: hints(),
                ready: true,
                suspended: false,
                stats: stats(),
            }],
        },
        DaemonMsg::Error {
            message: "no".into(),
        },
        DaemonMsg::Done,
        DaemonMsg::Protect {
            queue: 1,
            protected: true,
        },
    ];
    let frame = |m: &dyn Fn(&mut Vec<u8>)| {
        let mut b = Vec::new();
        m(&mut b);
        b
    };
    let mut out: Vec<(&str, Vec<u8>)> = client
        .iter()
        .map(|m| {
            (
                client_name(m),
                frame(&|b| write_frame(b, m).expect("encodes")),
            )
        })
        .collect();
    out.extend(daemon.iter().map(|m| {
        (
            daemon_name(m),
            frame(&|b| write_frame(b, m).expect("encodes")),
        )
    }));
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[test]
fn every_message_encodes_as_its_version_says() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("v{VERSION}.txt"));
    let now: String = samples()
        .iter()
        .map(|(name, bytes)| format!("{name} {}\n", hex(bytes)))
        .collect();
    let names: std::collections::BTreeSet<&str> = samples().iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names.len(),
        19,
        "one sample per variant (11 client, 8 daemon)"
    );
    match std::fs::read_to_string(&file) {
        Ok(pinned) => assert!(
            pinned == now,
            "the encoding changed under protocol version {VERSION}: bump VERSION in \
             crates/proto/src/messages.rs, then bless the new version's golden file \
             (XSCHED_BLESS=1 cargo test -p xsched-proto --test golden).\npinned:\n{pinned}\nnow:\n{now}"
        ),
        Err(_) if std::env::var_os("XSCHED_BLESS").is_some() => {
            std::fs::write(&file, &now).expect("write the golden file");
        }
        Err(e) => panic!(
            "{}: {e}; write it with XSCHED_BLESS=1 (only ever for a new VERSION)",
            file.display()
        ),
    }
}
