//! The daemon-facing commands: `serve`, `top`, `policy`, `hint`, and the `worker` process that
//! the demo and the tests run as a scheduled client.

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_bench::fg_bg;
use xsched_core::Hint;
use xsched_proto::{ClientMsg, DaemonMsg, client};
use xsched_runtime::{QueueOptions, Runtime, XQueue};

/// `xsched serve`: run the daemon in the foreground until killed.
pub fn serve(socket: &Path, policy: &str, metrics: Option<&str>) -> Result<()> {
    let daemon = xsched_daemon::Daemon::bind(socket, policy).context("starting the daemon")?;
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

/// One request to the daemon, one answer.
fn request(socket: &Path, msg: &ClientMsg) -> Result<DaemonMsg> {
    let mut s = client::connect(socket, Duration::from_secs(5))?;
    Ok(client::request(&mut s, msg)?)
}

/// `xsched top`: every queue the daemon schedules.
pub fn top(socket: &Path, once: bool, json: bool) -> Result<()> {
    loop {
        let policy = match request(socket, &ClientMsg::GetPolicy)? {
            DaemonMsg::Policy { name } => name,
            other => bail!("unexpected answer: {other:?}"),
        };
        let DaemonMsg::Top { rows } = request(socket, &ClientMsg::Top)? else {
            bail!("unexpected answer to top");
        };
        if json {
            let rows: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "pid": r.pid, "process": r.process, "device": r.device,
                        "queue": r.queue, "priority": r.hints.priority, "share": r.hints.share,
                        "ready": r.ready, "suspended": r.suspended,
                        "in_flight": r.stats.in_flight, "completed": r.stats.completed,
                        "recent_p99_us": r.stats.recent_p99_us,
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
                "pid", "process", "device", "queue", "priority", "share", "state",
            ]);
            for r in &rows {
                let state = match (r.ready, r.suspended) {
                    (_, true) => "suspended",
                    (true, false) => "running",
                    (false, false) => "idle",
                };
                t.add_row([
                    r.pid.to_string(),
                    r.process.clone(),
                    r.device.to_string(),
                    r.queue.to_string(),
                    r.hints.priority.to_string(),
                    r.hints.share.to_string(),
                    state.to_string(),
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
pub fn policy(socket: &Path, set: Option<&str>) -> Result<()> {
    let msg = match set {
        Some(name) => ClientMsg::SetPolicy {
            name: name.to_string(),
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

/// What an `xsched worker` process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Submit `commands` kernels with at most `window` outstanding; print the counts.
    Batch,
    /// The demo's foreground request stream; print its latency percentiles.
    Fg,
    /// The demo's background training loop until standard input closes; print its progress.
    Bg,
    /// The harvesting benchmark's HP service (`--requests` measured); print its latencies.
    HpService,
    /// The harvesting benchmark's LP job (`--kernel-us` kernels) until standard input closes;
    /// print when each kernel completed.
    Lp,
}

/// How a worker runs.
#[derive(Clone, Copy, Debug)]
pub struct WorkerArgs {
    /// Its role.
    pub role: Role,
    /// Kernel length (batch).
    pub kernel_us: u64,
    /// Kernels to submit (batch).
    pub commands: u32,
    /// Most kernels outstanding (batch).
    pub window: usize,
    /// Measured requests (fg).
    pub requests: u32,
    /// Pin the device's worker to this core.
    pub core: Option<usize>,
}

/// `xsched worker`: a client process with one queue configured from `XSCHED_*` (use
/// `XSCHED_SCHEDULER=global` to put it under the daemon). Prints one JSON line.
pub fn worker(args: WorkerArgs) -> Result<()> {
    let harvest = |line: Result<serde_json::Value, xsched_runtime::RuntimeError>| -> Result<()> {
        println!("{}", line.context("running the harvest worker")?);
        Ok(())
    };
    match args.role {
        Role::HpService => {
            let mut p = xsched_bench::harvest::HarvestParams::default();
            p.shape.requests = args.requests;
            return harvest(xsched_bench::harvest::hp_service_process(&p));
        }
        Role::Lp => {
            let kernel = Duration::from_micros(args.kernel_us);
            return harvest(xsched_bench::harvest::lp_process(kernel));
        }
        _ => {}
    }
    let runtime = Runtime::from_env().context("configuring the runtime from XSCHED_*")?;
    let device = match args.core {
        Some(core) => CpuDevice::pinned(1, core)?,
        None => CpuDevice::new(1)?,
    };
    let queue = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::from_env()?)?;
    let params = fg_bg::FgBgParams {
        requests: args.requests,
        ..fg_bg::FgBgParams::default()
    };
    let line = match args.role {
        Role::Batch | Role::HpService | Role::Lp => batch(&queue, args)?,
        Role::Fg => {
            let h = fg_bg::foreground(&queue, &params, || {});
            serde_json::json!({
                "p50_us": (h.value_at_quantile(0.5) as f64 / 100.0).round() / 10.0,
                "p99_us": (h.value_at_quantile(0.99) as f64 / 100.0).round() / 10.0,
                "requests": h.len(),
            })
        }
        Role::Bg => {
            let stop = AtomicBool::new(false);
            let done = AtomicU64::new(0);
            let start = std::time::Instant::now();
            std::thread::scope(|s| {
                s.spawn(|| {
                    // Run until the parent closes our standard input.
                    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                    stop.store(true, Ordering::Relaxed);
                });
                fg_bg::background(&queue, &params, &stop, &done);
            });
            serde_json::json!({
                "completed": done.load(Ordering::Relaxed),
                "seconds": start.elapsed().as_secs_f64(),
            })
        }
    };
    println!("{line}");
    Ok(())
}

fn batch(queue: &XQueue<CpuQueue>, args: WorkerArgs) -> Result<serde_json::Value> {
    let kernel = Arc::new(Spin::new(Duration::from_micros(args.kernel_us)));
    let mut outstanding = std::collections::VecDeque::new();
    let (mut completed, mut failed) = (0u32, 0u32);
    let mut settle = |h: xsched_runtime::CommandHandle| match h.wait() {
        Ok(()) => completed += 1,
        Err(_) => failed += 1,
    };
    for _ in 0..args.commands {
        outstanding.push_back(queue.submit(CpuCommand::Kernel(kernel.clone()))?);
        if outstanding.len() > args.window.max(1)
            && let Some(h) = outstanding.pop_front()
        {
            settle(h);
        }
    }
    for h in outstanding {
        settle(h);
    }
    Ok(serde_json::json!({"completed": completed, "failed": failed}))
}
