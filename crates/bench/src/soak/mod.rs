//! `xsched bench soak`: client processes under a daemon that is killed, stopped and restarted
//! while some clients are killed too; every command of every surviving client must run exactly
//! once, and the daemon must hold no queue of a dead client.
//!
//! Each client (`xsched worker --role soak`) submits host commands through the global scheduler
//! at a paced rate (so the run lasts long enough for every disturbance to land in it); each
//! command counts its own runs in its own slot, so the client can say at the end how many ran
//! exactly once, more than once, or never. This module starts a daemon (`xsched serve`), the
//! clients (priorities 0, 5 and 10 in turn, so the daemon suspends and resumes them), and then,
//! in an order drawn from the seed, SIGKILLs random clients (each replaced by a fresh one with
//! the same work, so the surviving clients still submit every command) and disturbs the daemon:
//! SIGKILL and a fresh daemon on the same socket, or SIGSTOP for a while and SIGCONT,
//! alternately. Clients run unscheduled while the daemon is away and register again when it is
//! back; nothing may be lost or run twice.
//!
//! What a soak runs with is `params.rs`, a client's body `client.rs`, the processes and their
//! disturbances `processes.rs`, and what the run reports `report.rs`.

mod client;
mod params;
mod processes;
mod report;

pub use client::client;
pub use params::{SoakOverrides, SoakParams};

use crate::Report;
use crate::error::BenchError;
use processes::{Soak, disturbance_plan, drive};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use report::{soak_checks, soak_report, tally_clients, total_row};
use std::path::Path;

/// Run a soak with `exe` (the `xsched` binary) for its daemon and clients.
pub fn run(exe: &Path, p: &SoakParams, tick: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let clients = p.clients.max(1);
    let per_client = (p.commands / clients as u64).max(1);
    let dir = std::env::temp_dir().join(format!("xsched-soak-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    let socket = dir.join("xsched.sock");
    let daemon = Soak::start_daemon(exe, &socket)?;
    let mut soak = Soak {
        exe,
        socket,
        daemon,
        per_client,
        rate: p.rate,
    };
    let mut rng = Pcg64::seed_from_u64(p.seed);
    let plan = disturbance_plan(p, &mut rng);
    let outcome = drive(&mut soak, p, clients, plan, &mut rng, tick)?;
    let (mut rows, tally) = tally_clients(&outcome.done)?;
    // The daemon must hold nothing of the clients now gone (killed ones included).
    let left = soak.rows_left_after_release();
    let expected = per_client * clients as u64;
    let checks = soak_checks(p, clients, per_client, &tally, &outcome.disturbed, left);
    rows.push(total_row(expected, &tally, outcome.wall));
    let _ = std::fs::remove_dir(&dir);
    Ok(soak_report(p, clients, expected, rows).with_checks(checks))
}
