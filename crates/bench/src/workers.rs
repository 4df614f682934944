//! What the `xsched worker` processes run (the two-process demo, the harvesting benchmark
//! through the daemon, the daemon's integration tests): one role each, on one queue configured
//! from `XSCHED_*`, reporting one JSON document.
//!
//! This is the dispatch from a [`Role`] to its body, which lives with its experiment
//! ([`fg_bg`], [`harvest`], [`soak`](crate::soak)). Nothing in the crate imports it back: the
//! experiments that start workers know only [`roles`](crate::roles).

use crate::error::BenchError;
use crate::roles::Role;
use crate::{fg_bg, harvest};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_runtime::{QueueOptions, Runtime, RuntimeError, XQueue};

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
pub fn run(args: WorkerArgs) -> Result<Value, BenchError> {
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
