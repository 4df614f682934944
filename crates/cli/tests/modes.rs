//! Rollout modes and accounting through the daemon, with real processes: `xsched mode set`
//! switches a running client's queue (a held background switched to observe runs while the
//! daemon would hold it; back to cooperative it is held again), and `xsched account --json`
//! reports every queue with the totals per process and per tenant.

mod support;

use std::process::Command;
use support::{Daemon, XSCHED, finished, row_of, socket, top, wait_for, worker_with};

fn xsched(args: &[&str]) -> std::process::Output {
    Command::new(XSCHED)
        .args(args)
        .output()
        .expect("xsched runs")
}

fn account(sock: &std::path::Path) -> serde_json::Value {
    let out = Command::new(XSCHED)
        .args(["account", "--json", "--socket"])
        .arg(sock)
        .output()
        .expect("account runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn mode_set_through_the_daemon_releases_and_holds_a_running_client_and_account_totals_it() {
    let sock = socket("modes");
    let _daemon = Daemon::start(&sock);
    let s = sock.to_str().expect("utf-8");
    let bg = worker_with(&sock, 0, 1000, 4000, &[("XSCHED_MODE", "cooperative")]);
    let bg_pid = bg.id();
    let fg = worker_with(&sock, 10, 1000, 6000, &[]);
    let fg_pid = fg.id();
    let held = |mode: &str| held(&sock, bg_pid, fg_pid, mode);
    wait_for(
        || held("cooperative"),
        "the cooperative background to be held",
    );

    let out = xsched(&[
        "mode",
        "set",
        "--pid",
        &bg_pid.to_string(),
        "observe",
        "--socket",
        s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The daemon still decides to hold it (and says so), but the observed queue runs.
    wait_for(|| held("observe"), "top to show the observed background");
    let completed = |doc: &serde_json::Value| {
        doc["queues"]
            .as_array()
            .and_then(|q| q.iter().find(|q| q["pid"] == bg_pid))
            .and_then(|q| q["account"]["completed"].as_u64())
            .unwrap_or(0)
    };
    let before = completed(&account(&sock));
    wait_for(
        || completed(&account(&sock)) > before + 50 && held("observe"),
        "the observed background to complete commands while the daemon would hold it",
    );

    let out = xsched(&[
        "mode",
        "set",
        "--pid",
        &bg_pid.to_string(),
        "cooperative",
        "--socket",
        s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(|| held("cooperative"), "the background to be held again");

    let doc = account(&sock);
    let uid = nix_uid();
    let tenant = doc["tenants"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["uid"] == uid))
        .expect("this user's tenant row")
        .clone();
    assert_eq!(tenant["processes"], 2);
    assert_eq!(tenant["queues"], 2);
    let sum: u64 = doc["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["uid"] == uid)
        .filter_map(|p| p["account"]["completed"].as_u64())
        .sum();
    assert_eq!(
        tenant["account"]["completed"].as_u64(),
        Some(sum),
        "the tenant adds its processes"
    );
    let bg_row = doc["queues"]
        .as_array()
        .and_then(|q| q.iter().find(|q| q["pid"] == bg_pid))
        .expect("the background queue")
        .clone();
    assert_eq!(bg_row["mode"], "cooperative");
    assert!(
        bg_row["account"]["preemptions"].as_u64() >= Some(1),
        "{bg_row}"
    );
    assert_eq!(
        bg_row["account"]["device_time"], "measured",
        "the CPU device times its tiles"
    );

    let mut fg = fg;
    let _ = fg.kill();
    let _ = fg.wait();
    assert_eq!(finished(bg)["completed"], 4000, "every command ran once");
}

#[test]
fn a_bad_mode_or_an_unknown_process_is_refused_with_the_reason() {
    let sock = socket("modes-bad");
    let _daemon = Daemon::start(&sock);
    let s = sock.to_str().expect("utf-8");
    let out = xsched(&["mode", "set", "--pid", "1", "turbo", "--socket", s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown mode `turbo`"), "{err}");
    let out = xsched(&["mode", "set", "--pid", "999999", "observe", "--socket", s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("process 999999 has no such queues"), "{err}");
}

/// Whether the daemon holds the background `bg` (in `mode`) while the foreground `fg` runs.
fn held(sock: &std::path::Path, bg: u32, fg: u32, mode: &str) -> bool {
    let rows = top(sock);
    row_of(&rows, bg).is_some_and(|r| r["suspended"] == true && r["mode"] == mode)
        && row_of(&rows, fg).is_some_and(|r| r["ready"] == true)
}

fn nix_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::uid(&m))
}
