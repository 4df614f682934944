//! A foreground pipeline across two CPU devices (stage 1 on A, then stage 2 on B) beside a
//! background training loop on each device: natively, with one fixed-priority policy per device
//! (`hpf`), and with one policy across both (`hpf-global`), the coordination case of XSched
//! §7.3. With a per-device policy, device B's background is suspended only when stage 2 arrives
//! there; with the global one it is held whenever the pipeline has work anywhere, so stage 2
//! never waits for a preemption.

use crate::error::BenchError;
use crate::fg_bg::{FgBgParams, background};
use crate::stats::pct_us;
use crate::{Check, Report};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Hint, Level};
use xsched_report::{Verdict, cells, columns, round3};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError, XQueue};
use xsched_workload::multi_device::{MODES, ShareMode, global_check};

/// The two devices, as the rows and checks name them.
const DEVICES: &str = "cpu + cpu";

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct MultiDeviceParams {
    /// Kernels per stage.
    pub stage_kernels: u32,
    /// Length of each stage kernel.
    pub stage_kernel: Duration,
    /// Time between requests.
    pub period: Duration,
    /// Measured requests per mode.
    pub requests: u32,
    /// The level of every queue under xsched.
    pub level: Level,
    /// The background (kernel length, iteration size).
    pub background: FgBgParams,
}

impl Default for MultiDeviceParams {
    fn default() -> Self {
        MultiDeviceParams {
            stage_kernels: 2,
            stage_kernel: Duration::from_micros(500),
            period: Duration::from_millis(20),
            requests: 200,
            level: Level::Block,
            background: FgBgParams::default(),
        }
    }
}

fn stage(q: &XQueue<CpuQueue>, kernel: &Arc<Spin>, n: u32) {
    let mut last = None;
    for _ in 0..n {
        last = q.submit(CpuCommand::Kernel(kernel.clone())).ok();
    }
    if let Some(h) = last {
        let _ = h.wait();
    }
}

fn run_mode(
    p: &MultiDeviceParams,
    mode: ShareMode,
) -> Result<hdrhistogram::Histogram<u64>, RuntimeError> {
    let runtime = Runtime::new(RuntimeConfig {
        policy: xsched_core::PolicySpec::registered(mode.policy().unwrap_or("hpf")),
        ..RuntimeConfig::default()
    })?;
    let devices = [CpuDevice::new(1)?, CpuDevice::new(1)?];
    let options = |priority| -> Result<QueueOptions, RuntimeError> {
        match mode.policy() {
            None => Ok(QueueOptions::native()),
            Some(_) => QueueOptions::default()
                .with_level(p.level)
                .with_hint(Hint::Priority(priority)),
        }
    };
    let mut fg = Vec::new();
    let mut bg = Vec::new();
    for d in &devices {
        fg.push(runtime.create_queue(Arc::new(d.create_queue()), options(1)?)?);
        if mode != ShareMode::Standalone {
            bg.push(runtime.create_queue(Arc::new(d.create_queue()), options(0)?)?);
        }
    }
    let kernel = Arc::new(Spin::new(p.stage_kernel));
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let mut hist = xsched_report::new_histogram();
    std::thread::scope(|s| {
        for q in &bg {
            s.spawn(|| background(q, &p.background, &stop, &done));
        }
        let start = Instant::now() + Duration::from_millis(20);
        let warmup = 10;
        for i in 0..warmup + p.requests {
            let arrival = start + p.period * i;
            std::thread::sleep(arrival.saturating_duration_since(Instant::now()));
            for q in &fg {
                stage(q, &kernel, p.stage_kernels);
            }
            if i >= warmup {
                xsched_report::record_duration(
                    &mut hist,
                    Instant::now().saturating_duration_since(arrival),
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    Ok(hist)
}

/// Rows `{mode, policy, level, p50_us, p99_us, p99_ratio}`.
pub fn run(p: &MultiDeviceParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let mut rows = Vec::new();
    let mut p99s = Vec::new();
    for (i, &mode) in MODES.iter().enumerate() {
        progress(i, MODES.len());
        let h = run_mode(p, mode)?;
        let p99 = pct_us(&h, 0.99);
        p99s.push(p99);
        // The rows name the policy: every mode that has one is xsched's.
        let (name, policy, level) = match mode.policy() {
            None => (mode.name(), json!(null), json!(null)),
            Some(policy) => ("xsched", json!(policy), json!(p.level.number())),
        };
        rows.push(cells(&[
            ("devices", json!(DEVICES)),
            ("mode", json!(name)),
            ("policy", policy),
            ("level", level),
            ("p50_us", json!(pct_us(&h, 0.5))),
            ("p99_us", json!(p99)),
            ("p99_ratio", json!(round3(p99 / p99s[0].max(1e-9)))),
        ]));
    }
    progress(MODES.len(), MODES.len());
    let ratio = |p99: f64| p99 / p99s[0].max(1e-9);
    let (native, per_device, global) = (ratio(p99s[1]), ratio(p99s[2]), ratio(p99s[3]));
    let checks = vec![
        global_check(DEVICES, global, per_device),
        // Beyond the paper's finding: on the CPU device scheduling per device helps at all.
        Check {
            name: format!("{DEVICES} per-device vs native P99 ratio"),
            target: "per-device < native".into(),
            measured: format!("{per_device:.2} vs {native:.2}"),
            verdict: Verdict::of(per_device < native),
        },
    ];
    Ok(Report {
        experiment: "multi-device pipeline (two cpu devices)".into(),
        columns: columns(&[
            "devices",
            "mode",
            "policy",
            "level",
            "p50_us",
            "p99_us",
            "p99_ratio",
        ]),
        rows,
        checks,
        events: None,
    })
}
