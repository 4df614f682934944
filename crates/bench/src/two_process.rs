//! `xsched demo --processes`: the demo's foreground and background as two separate processes
//! (the `xsched` binary's `worker` roles, `workers.rs`), natively and under a daemon this
//! module starts and stops.
//!
//! Each process has its own CPU device; both devices are pinned to core 0, so natively the OS
//! time-slices their kernels (as a GPU time-slices two contexts). Under xsched the daemon
//! suspends the background's queue while the foreground has work.

use crate::Report;
use crate::error::{BenchError, io};
use crate::fg_bg::{self, ShareMode};
use crate::harvest::report_of;
use crate::roles::{self, Role};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use xsched_core::Level;

fn worker(exe: &Path, role: Role, requests: u32) -> Command {
    let mut c = roles::command(exe, role);
    c.args(["--core", "0", "--requests", &requests.to_string()]);
    c
}

/// Configure a worker for `mode`.
fn configure(c: &mut Command, mode: ShareMode, socket: &Path, priority: i32) {
    match mode {
        ShareMode::Standalone | ShareMode::Native => {
            c.env("XSCHED_SCHEDULER", "app");
        }
        ShareMode::XSched(level) => {
            c.env("XSCHED_SCHEDULER", "global")
                .env("XSCHED_SOCKET", socket)
                .env("XSCHED_PRIORITY", priority.to_string())
                .env("XSCHED_LEVEL", level.number().to_string());
        }
    }
}

/// Run every mode with `exe` (the `xsched` binary) as the two processes; the same rows as the
/// in-process demo. Standalone runs first and again last, so the baseline every ratio divides
/// by is measured before and after the others, and its move between the two is judged
/// ([`fg_bg::Baseline`]); its P50 and P99 are the two runs' means.
pub fn run(
    exe: &Path,
    requests: u32,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, BenchError> {
    let socket = std::env::temp_dir().join(format!("xsched-demo-{}.sock", std::process::id()));
    let daemon =
        xsched_daemon::Daemon::bind(&socket, &xsched_core::PolicySpec::default())?.spawn()?;
    let mut modes = ShareMode::all(&Level::ALL);
    modes.push(ShareMode::Standalone);
    let mut results: Vec<fg_bg::ModeResult> = Vec::new();
    for (i, &mode) in modes.iter().enumerate() {
        progress(i, modes.len());
        let r = run_mode(exe, mode, &socket, requests)?;
        match results.iter_mut().find(|x| x.mode == mode) {
            Some(first) => {
                let n = first.runs_p99_us.len() as f64;
                first.p50_us = (first.p50_us * n + r.p50_us) / (n + 1.0);
                first.p99_us = (first.p99_us * n + r.p99_us) / (n + 1.0);
                first.runs_p99_us.push(r.p99_us);
            }
            None => results.push(r),
        }
    }
    progress(modes.len(), modes.len());
    daemon.stop();
    Ok(fg_bg::report(
        "fg-bg, two processes (cpu device, daemon)",
        &results,
    ))
}

/// One mode: the foreground worker to its end, beside the background worker unless standalone.
fn run_mode(
    exe: &Path,
    mode: ShareMode,
    socket: &Path,
    requests: u32,
) -> Result<fg_bg::ModeResult, BenchError> {
    let bg = if mode == ShareMode::Standalone {
        None
    } else {
        let mut c = worker(exe, Role::Bg, requests);
        configure(&mut c, mode, socket, 0);
        Some(
            c.stdin(Stdio::piped())
                .spawn()
                .map_err(io("starting the background"))?,
        )
    };
    let mut fg = worker(exe, Role::Fg, requests);
    configure(&mut fg, mode, socket, 10);
    let fg_out = fg.output().map_err(io("running the foreground"))?;
    let fg_json = report_of(fg_out, "foreground")?;
    let share = match bg {
        None => 0.0,
        Some(mut child) => {
            // Closing its standard input ends the background's loop.
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.flush();
            }
            let out = child
                .wait_with_output()
                .map_err(io("stopping the background"))?;
            let bg_json = report_of(out, "background")?;
            let done = bg_json["completed"].as_f64().unwrap_or(0.0);
            let secs = bg_json["seconds"].as_f64().unwrap_or(1.0).max(1e-9);
            done * fg_bg::FgBgParams::default().bg_kernel.as_secs_f64() / secs
        }
    };
    let p99_us = fg_json["p99_us"].as_f64().unwrap_or(0.0);
    Ok(fg_bg::ModeResult {
        mode,
        p50_us: fg_json["p50_us"].as_f64().unwrap_or(0.0),
        p99_us,
        runs_p99_us: vec![p99_us],
        bg_device_share: share,
    })
}
