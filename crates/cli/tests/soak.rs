//! The soak, short: client processes under a daemon that is SIGKILLed and restarted and
//! SIGSTOPped while clients are SIGKILLed; every surviving client's commands run exactly once
//! and no dead client's queue stays in the daemon. (`xsched bench soak` with its defaults, 1 000
//! 000 commands, is the benchmark; its figures are in the docs' benchmark record.)

use std::process::Command;

#[test]
fn every_surviving_command_runs_exactly_once_through_kills_and_daemon_restarts() {
    let out = Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args([
            "bench",
            "soak",
            "--json",
            "--clients",
            "4",
            "--commands",
            "20000",
        ])
        .args([
            "--kills",
            "2",
            "--restarts",
            "3",
            "--rate",
            "4000",
            "--stopped-ms",
            "700",
        ])
        .output()
        .expect("xsched runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let checks = doc["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 4);
    for c in checks {
        assert_eq!(c["verdict"], "met", "{c}");
    }
    let total = doc["rows"]
        .as_array()
        .and_then(|r| r.last())
        .expect("the total row");
    assert_eq!(total["exactly_once"], 20000);
    assert_eq!(total["more_than_once"], 0);
}
