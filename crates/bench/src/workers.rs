//! What the `xsched worker` processes run (the two-process demo, the harvesting benchmark
//! through the daemon, the daemon's integration tests): one role each, on one queue configured
//! from `XSCHED_*`, reporting one JSON document.

use crate::fg_bg;
use crate::harvest;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_runtime::{QueueOptions, Runtime, RuntimeError, XQueue};

/// What a worker process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Submit `commands` kernels with at most `window` outstanding; report the counts.
    Batch,
    /// The demo's foreground request stream; report its latency percentiles.
    Fg,
    /// The demo's background training loop until standard input closes; report its progress.
    Bg,
    /// The harvesting benchmark's HP service (`requests` measured); report its latencies.
    HpService,
    /// The harvesting benchmark's LP job (`kernel_us` kernels) until standard input closes;
    /// report when each kernel completed.
    Lp,
    /// The soak's client: `commands` host commands (at most `window` outstanding), each of
    /// which counts its own runs; report how many ran exactly once, more, or never.
    Soak,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Batch,
        Role::Fg,
        Role::Bg,
        Role::HpService,
        Role::Lp,
        Role::Soak,
    ];

    /// The role's name on the command line (`xsched worker --role NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Batch => "batch",
            Role::Fg => "fg",
            Role::Bg => "bg",
            Role::HpService => "hp-service",
            Role::Lp => "lp",
            Role::Soak => "soak",
        }
    }

    /// The role called `name`; the error lists the names.
    pub fn from_name(name: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
                format!(
                    "unknown role {name:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// `exe worker --role <role>`: a worker process whose report comes back on its standard output
/// (its standard error is the caller's).
pub(crate) fn command(exe: &Path, role: Role) -> Command {
    let mut c = Command::new(exe);
    c.args(["worker", "--role", role.name()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

/// How a worker runs.
#[derive(Clone, Copy, Debug)]
pub struct WorkerArgs {
    /// Its role.
    pub role: Role,
    /// Pin the device's worker thread to this core.
    pub core: Option<usize>,
    /// Measured requests (fg, hp-service).
    pub requests: u32,
    /// Kernel length (batch, lp).
    pub kernel_us: u64,
    /// Kernels to submit (batch).
    pub commands: u32,
    /// Most kernels outstanding (batch, soak).
    pub window: usize,
    /// Commands per second, paced (soak; 0: unpaced).
    pub rate: u32,
}

/// Run the worker; its report.
pub fn run(args: WorkerArgs) -> Result<Value, RuntimeError> {
    match args.role {
        Role::HpService => {
            let mut p = harvest::HarvestParams::default();
            p.shape.requests = args.requests;
            return harvest::hp_service_process(&p);
        }
        Role::Lp => return harvest::lp_process(Duration::from_micros(args.kernel_us)),
        Role::Batch | Role::Fg | Role::Bg | Role::Soak => {}
    }
    let runtime = Runtime::from_env()?;
    let device = match args.core {
        Some(core) => CpuDevice::pinned(1, core)?,
        None => CpuDevice::new(1)?,
    };
    let queue = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::from_env()?)?;
    let params = fg_bg::FgBgParams {
        requests: args.requests,
        ..fg_bg::FgBgParams::default()
    };
    Ok(match args.role {
        Role::Fg => {
            let h = fg_bg::foreground(&queue, &params, || {});
            json!({
                "p50_us": xsched_report::round1(xsched_report::hist_quantile_us(&h, 0.5)),
                "p99_us": xsched_report::round1(xsched_report::hist_quantile_us(&h, 0.99)),
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
            json!({
                "completed": done.load(Ordering::Relaxed),
                "seconds": start.elapsed().as_secs_f64(),
            })
        }
        Role::Soak => crate::soak::client(&queue, args.commands, args.window, args.rate)?,
        Role::Batch | Role::HpService | Role::Lp => batch(&queue, args)?,
    })
}

fn batch(queue: &XQueue<CpuQueue>, args: WorkerArgs) -> Result<Value, RuntimeError> {
    let kernel = Arc::new(Spin::new(Duration::from_micros(args.kernel_us)));
    let mut outstanding = VecDeque::new();
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
    Ok(json!({"completed": completed, "failed": failed}))
}
