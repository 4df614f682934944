//! What a soak reports: each finished client's counts (ran exactly once, more, never, failed) as
//! a row and summed, the checks on them and on the disturbances that landed, and the table.

use super::params::SoakParams;
use super::processes::Disturbed;
use crate::Report;
use crate::error::BenchError;
use serde_json::{Value, json};
use std::time::Duration;
use xsched_report::{Check, Verdict, cells, columns};

/// The finished clients' reports, summed.
#[derive(Default)]
pub(super) struct SoakTotals {
    once: u64,
    more: u64,
    never: u64,
    failed: u64,
}

/// Parses each finished client's report into a row of its own, and sums them.
pub(super) fn tally_clients(
    done: &[(i32, std::process::Output)],
) -> Result<(Vec<xsched_report::Row>, SoakTotals), BenchError> {
    let mut rows = Vec::new();
    let mut t = SoakTotals::default();
    for (priority, out) in done {
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value =
            serde_json::from_str(text.trim()).map_err(|source| BenchError::ClientReport {
                text: text.to_string(),
                status: out.status,
                source,
            })?;
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        t.once += n("exactly_once");
        t.more += n("more_than_once");
        t.never += n("never");
        t.failed += n("failed");
        rows.push(cells(&[
            ("priority", json!(priority)),
            ("commands", json!(n("commands"))),
            ("exactly_once", json!(n("exactly_once"))),
            ("more_than_once", json!(n("more_than_once"))),
            ("never", json!(n("never"))),
            ("failed", json!(n("failed"))),
        ]));
    }
    Ok((rows, t))
}

/// The soak's checks: exactly once, the client kills, the daemon disturbances and the rows
/// `left` in the daemon.
pub(super) fn soak_checks(
    p: &SoakParams,
    clients: usize,
    per_client: u64,
    t: &SoakTotals,
    d: &Disturbed,
    left: Option<usize>,
) -> Vec<Check> {
    let expected = per_client * clients as u64;
    let (once, more, never, failed) = (t.once, t.more, t.never, t.failed);
    let (kills, daemon_kills, stops) = (d.kills, d.daemon_kills, d.stops);
    vec![
        Check {
            name: "every command of every surviving client ran exactly once".into(),
            target: format!("{expected} of {expected} ({clients} clients × {per_client})"),
            measured: format!(
                "{once} exactly once, {more} more than once, {never} never, {failed} failed"
            ),
            verdict: Verdict::of(once == expected && more == 0 && never == 0 && failed == 0),
        },
        Check {
            name: "clients SIGKILLed and replaced during the run".into(),
            target: format!("{}", p.kills),
            measured: format!("{kills}"),
            verdict: Verdict::of(kills == p.kills),
        },
        Check {
            name: "daemon disturbances during the run".into(),
            target: format!(
                "{} (SIGKILL + restart, SIGSTOP/SIGCONT alternately)",
                p.restarts
            ),
            measured: format!(
                "{daemon_kills} SIGKILL + restart, {stops} SIGSTOP {:.1} s + SIGCONT",
                p.stopped_for.as_secs_f64()
            ),
            verdict: Verdict::of(daemon_kills + stops == p.restarts),
        },
        Check {
            name: "no queue of a gone client left in the daemon".into(),
            target: "0 rows in top".into(),
            measured: left.map_or_else(|| "no answer".into(), |n| format!("{n} rows")),
            verdict: Verdict::of(left == Some(0)),
        },
    ]
}

/// The row of all clients together, with the run's wall time and command rate.
pub(super) fn total_row(expected: u64, t: &SoakTotals, wall: Duration) -> xsched_report::Row {
    cells(&[
        ("priority", json!("all")),
        ("commands", json!(expected)),
        ("exactly_once", json!(t.once)),
        ("more_than_once", json!(t.more)),
        ("never", json!(t.never)),
        ("failed", json!(t.failed)),
        ("wall_s", json!(xsched_report::round1(wall.as_secs_f64()))),
        (
            "commands_per_s",
            json!((expected as f64 / wall.as_secs_f64()).round()),
        ),
    ])
}

/// The soak's report (without its checks) over `rows`.
pub(super) fn soak_report(
    p: &SoakParams,
    clients: usize,
    expected: u64,
    rows: Vec<xsched_report::Row>,
) -> Report {
    Report::new(
        format!(
            "soak: {clients} client processes, {expected} commands, {} client kills, {} daemon \
             disturbances",
            p.kills, p.restarts
        ),
        columns(&[
            "priority",
            "commands",
            "exactly_once",
            "more_than_once",
            "never",
            "failed",
            "wall_s",
            "commands_per_s",
        ]),
        rows,
    )
}
