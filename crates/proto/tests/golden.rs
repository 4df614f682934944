//! The encoding of every message, pinned per protocol version. A change to any message's bytes
//! fails here until `VERSION` is bumped and the new version's golden file is written
//! (`XSCHED_BLESS=1 cargo test -p xsched-proto --test golden`, which only ever creates a missing
//! file); an existing version's file is never rewritten, so a format change cannot be blessed in
//! under an old version number. [`GOLDEN`] holds every file's SHA-256 and what its version
//! changed, and a test fails when a file differs from its hash: a new version adds a file and a
//! line there, and no line is ever edited.
//!
//! The files are the historical record of what each version put on the wire, as it shipped.
//! `v4.txt` is v4 as released (commit 2112fc2); the `Bounds` message added after it is v5, and
//! today's code writes v5. A v4 client cannot decode `Bounds`, so it is refused at the
//! handshake, as the versions' rule says: peers talk only at the same version, and are told
//! why not otherwise.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::PathBuf;
use xsched_proto::{
    ClientMsg, DaemonMsg, QueueStats, TopRow, VERSION, WireAccount, WireHint, WireHints,
    WireRolloutMode, read_frame, write_frame,
};

/// Every golden file: its name, its SHA-256, and what its version changed. Append a line for a
/// new version; never edit one.
const GOLDEN: [(&str, &str, &str); 4] = [
    (
        "v2.txt",
        "79c9330d678f1b2ac40681a80e2082bd33f422b84a2ded5a9cd4ad9f028cb483",
        "hints are the protocol's own types (with the SLO hint); Stats and Protect",
    ),
    (
        "v3.txt",
        "0d4cc3392173f7f49105160471b4249db0761c181fda0e9c47526b3a47523789",
        "Ping/Pong (the agent's heartbeat); Top is paged",
    ),
    (
        "v4.txt",
        "affa57af30b553da373ad87124af7c33b6e4a3a98f588f224f13eaf4fbda0150",
        "Stats carry the queue's accounting and mode, Top rows the owner's uid; SetMode",
    ),
    (
        "v5.txt",
        "2be5679be62b5d602c945f349fb06e9cee2b8a380863044e6b890a72d69fae2a",
        "Bounds: a tenant's share of the daemon's limits (every v4 frame but the handshake's \
         version number encodes as in v4)",
    ),
];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

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
        ClientMsg::Top { .. } => "client.top",
        ClientMsg::Stats { .. } => "client.stats",
        ClientMsg::Ping { .. } => "client.ping",
        ClientMsg::SetMode { .. } => "client.set-mode",
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
        DaemonMsg::Pong { .. } => "daemon.pong",
        DaemonMsg::SetMode { .. } => "daemon.set-mode",
        DaemonMsg::Bounds { .. } => "daemon.bounds",
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
        mode: Some(WireRolloutMode::Cooperative),
        account: WireAccount {
            submitted: 120,
            launched: 110,
            completed: 99,
            cancelled: 10,
            latency_ns: 5_000_000,
            device_ns: 4_000_000,
            device_measured: true,
            queue_wait_ns: 700_000,
            queue_wait_max_ns: 90_000,
            max_in_flight: 8,
            latency_misses: 3,
            preemptions: 4,
            held_ns: 2_000_000,
            preemption_cost_ns: 12_000,
            interrupts: 2,
        },
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
        ClientMsg::Top { from: 7 },
        ClientMsg::Stats {
            queue: 1,
            stats: stats(),
        },
        ClientMsg::Ping { seq: 300 },
        ClientMsg::SetMode {
            pid: 4242,
            queue: None,
            mode: WireRolloutMode::Observe,
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
                uid: 1000,
                process: "infer".into(),
                device: 0,
                queue: 1,
                hints: hints(),
                ready: true,
                suspended: false,
                stats: stats(),
            }],
            next: Some(9),
        },
        DaemonMsg::Error {
            message: "no".into(),
        },
        DaemonMsg::Done,
        DaemonMsg::Protect {
            queue: 1,
            protected: true,
        },
        DaemonMsg::Pong { seq: 300 },
        DaemonMsg::SetMode {
            queue: 1,
            mode: WireRolloutMode::Preemptive,
        },
        DaemonMsg::Bounds {
            queue: 1,
            max_pending: Some(16),
            inflight_us: None,
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
    let file = golden_dir().join(format!("v{VERSION}.txt"));
    let now: String = samples()
        .iter()
        .map(|(name, bytes)| format!("{name} {}\n", hex(bytes)))
        .collect();
    let names: std::collections::BTreeSet<&str> = samples().iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names.len(),
        24,
        "one sample per variant (13 client, 11 daemon)"
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

#[test]
fn no_golden_file_is_ever_rewritten() {
    let mut found = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(golden_dir()).expect("tests/golden") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 file name")
            .to_string();
        let bytes = std::fs::read(&path).expect("readable");
        let hash = hex(&Sha256::digest(&bytes));
        match GOLDEN.iter().find(|(file, _, _)| *file == name) {
            Some((_, pinned, _)) => assert!(
                *pinned == hash,
                "tests/golden/{name} was rewritten (sha256 {hash}, pinned {pinned}): golden files \
                 are never rewritten. Restore it (git checkout -- crates/proto/tests/golden/{name}); \
                 a change to the encoding is a new VERSION with a new file"
            ),
            None => panic!(
                "tests/golden/{name} is not in GOLDEN: a new version adds its file and one line \
                 there, (\"{name}\", \"{hash}\", \"what it changed\")"
            ),
        }
        found.insert(name);
    }
    for (file, _, _) in GOLDEN {
        assert!(
            found.contains(file),
            "tests/golden/{file} is gone: golden files are never removed"
        );
    }
    assert!(
        found.contains(&format!("v{VERSION}.txt")),
        "the current version's file is pinned"
    );
}

/// The handshake frames, as every version encodes them (a `Hello` naming the peer's own version).
const HANDSHAKE: [&str; 3] = ["client.hello", "daemon.welcome", "daemon.error"];

/// One version's golden file as name → hex.
fn pinned(version: u16) -> Option<std::collections::BTreeMap<String, String>> {
    let file = golden_dir().join(format!("v{version}.txt"));
    let text = std::fs::read_to_string(file).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, h)| (n.to_string(), h.to_string()))
            .collect(),
    )
}

#[test]
fn the_handshake_is_the_same_in_every_version() {
    let now: std::collections::BTreeMap<&str, String> = samples()
        .iter()
        .map(|(name, bytes)| (*name, hex(bytes)))
        .collect();
    let mut older = 0;
    for version in 1..VERSION {
        let Some(old) = pinned(version) else { continue };
        older += 1;
        for name in HANDSHAKE {
            let (old_hex, now_hex) = (&old[name], &now[name]);
            // Hello and Welcome carry the version number itself (the last byte here: the
            // versions so far are below 128, one varint byte); the rest must match.
            let strip = |h: &str| -> String {
                if name == "daemon.error" {
                    h.to_string()
                } else {
                    h[..h.len() - 2].to_string()
                }
            };
            assert_eq!(
                strip(old_hex),
                strip(now_hex),
                "{name} encodes differently in v{version} and v{VERSION}: peers of those versions \
                 could not tell each other why they cannot talk"
            );
        }
        // Today's code reads the older peer's handshake as that version's: a daemon refuses
        // an older client by its version, and an older daemon's refusal reaches the user.
        let frame = |name: &str| unhex(&old[name]);
        assert_eq!(
            read_frame::<ClientMsg>(&mut frame("client.hello").as_slice()).ok(),
            Some(Some(ClientMsg::Hello { version })),
            "v{version}'s Hello read by v{VERSION}"
        );
        assert_eq!(
            read_frame::<DaemonMsg>(&mut frame("daemon.welcome").as_slice()).ok(),
            Some(Some(DaemonMsg::Welcome { version })),
            "v{version}'s Welcome read by v{VERSION}"
        );
        assert!(
            matches!(
                read_frame::<DaemonMsg>(&mut frame("daemon.error").as_slice()),
                Ok(Some(DaemonMsg::Error { .. }))
            ),
            "v{version}'s Error read by v{VERSION}"
        );
    }
    assert!(
        older >= 3,
        "the older versions' golden files are kept (v2, v3, v4)"
    );
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("a golden file holds hex"))
        .collect()
}

#[test]
fn the_largest_top_page_fits_in_a_frame() {
    let worst = TopRow {
        pid: u32::MAX,
        uid: u32::MAX,
        process: "p".repeat(16),
        device: u16::MAX,
        queue: u32::MAX,
        hints: WireHints {
            priority: i32::MIN,
            share: u32::MAX,
            time_slice_ns: Some(u64::MAX),
            laxity_ns: Some(u64::MAX),
            deadline_ns: Some(u64::MAX),
            slo_ns: Some(u64::MAX),
        },
        ready: true,
        suspended: true,
        stats: QueueStats {
            in_flight: u64::MAX,
            completed: u64::MAX,
            recent_p99_us: f64::MAX,
            mode: Some(WireRolloutMode::Preemptive),
            account: WireAccount {
                submitted: u64::MAX,
                launched: u64::MAX,
                completed: u64::MAX,
                cancelled: u64::MAX,
                latency_ns: u64::MAX,
                device_ns: u64::MAX,
                device_measured: true,
                queue_wait_ns: u64::MAX,
                queue_wait_max_ns: u64::MAX,
                max_in_flight: u64::MAX,
                latency_misses: u64::MAX,
                preemptions: u64::MAX,
                held_ns: u64::MAX,
                preemption_cost_ns: u64::MAX,
                interrupts: u64::MAX,
            },
        },
    };
    let row = postcard::to_allocvec(&worst).expect("encodes").len();
    assert_eq!(row, 262, "the bound TOP_PAGE_ROWS was chosen by");
    let page = DaemonMsg::Top {
        rows: vec![worst; xsched_proto::TOP_PAGE_ROWS],
        next: Some(u32::MAX),
    };
    let mut frame = Vec::new();
    write_frame(&mut frame, &page).expect("a full page of the largest rows fits in one frame");
}
