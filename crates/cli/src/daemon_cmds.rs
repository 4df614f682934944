//! The daemon-facing commands: `serve`, `top`, `policy`, `hint`, `mode set`.

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use std::path::Path;
use std::time::Duration;
use xsched_core::{Hint, PolicySpec};
use xsched_proto::{ClientMsg, DaemonMsg, client};

/// `xsched serve`: run the daemon in the foreground until killed.
pub fn serve(
    socket: &Path,
    policy: &PolicySpec,
    metrics: Option<&str>,
    config: Option<&Path>,
) -> Result<()> {
    let config = match config {
        Some(path) => xsched_daemon::DaemonConfig::load(path)?,
        None => xsched_daemon::DaemonConfig::default(),
    };
    let daemon =
        xsched_daemon::Daemon::bind_with(socket, policy, &config).context("starting the daemon")?;
    eprintln!(
        "xsched daemon listening on {} (policy {policy})",
        socket.display()
    );
    if let Some(addr) = metrics {
        let bound = daemon
            .serve_metrics(addr)
            .with_context(|| format!("serving metrics on {addr}"))?;
        eprintln!("metrics at http://{bound}/metrics");
    }
    daemon.serve();
    Ok(())
}

/// How long an operator command waits for the daemon at each step.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// One request to the daemon, one answer.
fn request(socket: &Path, msg: &ClientMsg) -> Result<DaemonMsg> {
    let mut s = client::connect(socket, TIMEOUT)?;
    Ok(client::request(&mut s, msg)?)
}

/// `xsched top`: every queue the daemon schedules (that this user may see).
pub fn top(socket: &Path, once: bool, json: bool) -> Result<()> {
    loop {
        let mut s = client::connect(socket, TIMEOUT)?;
        let policy = match client::request(&mut s, &ClientMsg::GetPolicy)? {
            DaemonMsg::Policy { name } => name,
            other => bail!("unexpected answer: {other:?}"),
        };
        let rows = client::top(&mut s)?;
        drop(s);
        if json {
            let rows: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "pid": r.pid, "process": r.process, "device": r.device,
                        "queue": r.queue, "priority": r.hints.priority, "share": r.hints.share,
                        "ready": r.ready, "suspended": r.suspended,
                        "in_flight": r.stats.in_flight, "completed": r.stats.completed,
                        "recent_p99_us": r.stats.recent_p99_us, "uid": r.uid,
                        "mode": r.stats.mode.map(|m| m.name()),
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string(&serde_json::json!({"policy": policy, "rows": rows}))?
            );
        } else {
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header([
                "pid",
                "process",
                "device",
                "queue",
                "priority",
                "share",
                "state",
                "mode",
                "in flight",
                "completed",
                "P99 us (1 s)",
            ]);
            for r in &rows {
                t.add_row([
                    r.pid.to_string(),
                    r.process.clone(),
                    r.device.to_string(),
                    r.queue.to_string(),
                    r.hints.priority.to_string(),
                    r.hints.share.to_string(),
                    r.state().to_string(),
                    r.stats.mode_name().to_string(),
                    r.stats.in_flight.to_string(),
                    r.stats.completed.to_string(),
                    format!("{:.1}", r.stats.recent_p99_us),
                ]);
            }
            if !once {
                print!("\x1b[2J\x1b[H");
            }
            println!("policy {policy}, {} queues\n{t}", rows.len());
        }
        if once {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `xsched policy get|set`.
pub fn policy(socket: &Path, set: Option<&PolicySpec>) -> Result<()> {
    let msg = match set {
        Some(spec) => ClientMsg::SetPolicy {
            name: spec.to_string(),
        },
        None => ClientMsg::GetPolicy,
    };
    match request(socket, &msg)? {
        DaemonMsg::Policy { name } => println!("{name}"),
        other => bail!("unexpected answer: {other:?}"),
    }
    Ok(())
}

/// `xsched hint`: advise the daemon about another process's queues.
pub fn hint(socket: &Path, pid: u32, queue: Option<u32>, hint: Hint) -> Result<()> {
    let hint = hint.into();
    match request(socket, &ClientMsg::HintProcess { pid, queue, hint })? {
        DaemonMsg::Done => Ok(()),
        other => bail!("unexpected answer: {other:?}"),
    }
}

/// `xsched mode set`: switch the rollout mode of another process's queues (same user, or
/// root, as hints).
pub fn set_mode(
    socket: &Path,
    pid: u32,
    queue: Option<u32>,
    mode: xsched_runtime::RolloutMode,
) -> Result<()> {
    let mode = mode.into();
    match request(socket, &ClientMsg::SetMode { pid, queue, mode })? {
        DaemonMsg::Done => Ok(()),
        other => bail!("unexpected answer: {other:?}"),
    }
}
