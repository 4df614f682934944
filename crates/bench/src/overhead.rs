//! What running through an XQueue costs: the time of one `submit` call, and the throughput a
//! stream of commands loses against launching them straight onto the hardware queue, at
//! launch thresholds 1 to 32.

use crate::error::BenchError;
use crate::stats::pct_us;
use crate::{Check, Report, switches};
use serde_json::json;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{CommandId, LaunchConfig};
use xsched_report::{Verdict, cells, columns, round3};
use xsched_runtime::{
    CommandError, Completion, CompletionSink, HwQueue, QueueOptions, Runtime, RuntimeConfig,
    RuntimeError, XQueue,
};

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct OverheadParams {
    /// Command length.
    pub command: Duration,
    /// Commands per run.
    pub commands: u32,
    /// Thresholds to try (batch = max(1, threshold / 2), no time budget).
    pub thresholds: Vec<u32>,
    /// Direct/xsched run pairs per configuration (the median pair's loss is reported).
    pub repeats: u32,
    /// Submit calls timed for the per-command cost.
    pub submit_samples: u32,
}

impl Default for OverheadParams {
    fn default() -> Self {
        OverheadParams {
            command: Duration::from_micros(100),
            commands: 500,
            thresholds: vec![1, 2, 4, 8, 16, 32],
            repeats: 31,
            submit_samples: 20_000,
        }
    }
}

/// Counts completions of direct launches, and wakes the waiter only at the last one (a wake-up
/// per completion would slow the device sharing the machine and flatter xsched).
struct Counter {
    done: Mutex<u64>,
    cond: Condvar,
    of: u64,
}

impl CompletionSink for Counter {
    fn complete(&self, _: CommandId, _: bool, _: Result<(), CommandError>) {
        let last = self.done.lock().is_ok_and(|mut d| {
            *d += 1;
            *d >= self.of
        });
        if last {
            self.cond.notify_all();
        }
    }
}

impl Counter {
    fn wait_for(&self, n: u64) {
        let Ok(mut d) = self.done.lock() else { return };
        while *d < n {
            d = match self.cond.wait(d) {
                Ok(d) => d,
                Err(_) => return,
            };
        }
    }
}

/// Launch `n` commands straight onto a hardware queue; wall time until all completed.
fn direct(device: &CpuDevice, kernel: &Arc<Spin>, n: u32) -> Duration {
    let hw = device.create_queue();
    let counter = Arc::new(Counter {
        done: Mutex::new(0),
        cond: Condvar::new(),
        of: u64::from(n),
    });
    let t = Instant::now();
    for i in 0..n {
        let done = Completion::new(counter.clone(), CommandId(u64::from(i)), false);
        hw.launch(CpuCommand::Kernel(kernel.clone()), done);
    }
    counter.wait_for(u64::from(n));
    t.elapsed()
}

/// Submit `n` commands through an XQueue; wall time until all completed.
fn through_xqueue(
    q: &XQueue<CpuQueue>,
    kernel: &Arc<Spin>,
    n: u32,
) -> Result<Duration, RuntimeError> {
    let t = Instant::now();
    for _ in 0..n {
        q.submit(CpuCommand::Kernel(kernel.clone()))?;
    }
    let _ = q.wait_all();
    Ok(t.elapsed())
}

/// Time of one `submit` on a suspended queue (nothing launches, so only the call is timed).
fn submit_cost(
    runtime: &Runtime,
    device: &CpuDevice,
    samples: u32,
) -> Result<hdrhistogram::Histogram<u64>, RuntimeError> {
    let q = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::default())?;
    q.suspend()?;
    let kernel = Arc::new(Spin::new(Duration::from_micros(1)));
    let mut hist = xsched_report::new_histogram();
    for _ in 0..samples {
        let cmd = CpuCommand::Kernel(kernel.clone());
        let t = Instant::now();
        let h = q.submit(cmd)?;
        xsched_report::record_duration(&mut hist, t.elapsed());
        drop(h);
    }
    q.cancel_pending()?;
    Ok(hist)
}

/// Rows `{threshold, batch, budget_us, direct_ms, xsched_ms, loss_pct}` (thresholds at Level 3,
/// where no budget binds, plus the default config at Levels 3 and 1) and one submit-cost row.
pub fn run(p: &OverheadParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let device = CpuDevice::new(1)?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let kernel = Arc::new(Spin::new(p.command));
    let configs = queue_configs(&p.thresholds)?;
    let total = configs.len() + 1;
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for (i, (name, options)) in configs.iter().enumerate() {
        progress(i, total);
        let (row, check) = measure_config(p, &runtime, &device, &kernel, name, options)?;
        rows.push(row);
        checks.extend(check);
    }
    progress(configs.len(), total);
    let submit = submit_cost(&runtime, &device, p.submit_samples)?;
    rows.push(submit_row(&submit));
    progress(total, total);
    Ok(Report {
        experiment: "overhead (cpu device)".into(),
        columns: columns(&[
            "threshold",
            "batch",
            "budget_us",
            "direct_ms",
            "xsched_ms",
            "loss_pct",
            "direct_switches_per_cmd",
            "xsched_switches_per_cmd",
        ]),
        rows,
        checks,
        events: None,
    })
}

/// The configurations tried, named: each threshold at Level 3 with no in-flight budget, then
/// the default config at Levels 3 and 1.
fn queue_configs(thresholds: &[u32]) -> Result<Vec<(String, QueueOptions)>, RuntimeError> {
    let mut configs: Vec<(String, QueueOptions)> = Vec::new();
    for &t in thresholds {
        let config = LaunchConfig::new(t, (t / 2).max(1))?;
        configs.push((
            t.to_string(),
            QueueOptions::default().with_config(config.with_inflight_budget(None)),
        ));
    }
    configs.push(("default (L3)".into(), QueueOptions::default()));
    configs.push((
        "default (L1)".into(),
        QueueOptions::default().with_level(xsched_core::Level::Block),
    ));
    Ok(configs)
}

/// One configuration's row (median direct and xsched times, loss, switches per command), and
/// the loss check when it is threshold 8.
fn measure_config(
    p: &OverheadParams,
    runtime: &Runtime,
    device: &CpuDevice,
    kernel: &Arc<Spin>,
    name: &str,
    options: &QueueOptions,
) -> Result<(xsched_report::Row, Option<Check>), RuntimeError> {
    let runs = alternate_runs(p, runtime, device, kernel, options)?;
    let pairs = &runs.pairs;
    let per_command = |n: u64| n as f64 / f64::from(p.repeats * p.commands);
    let losses: Vec<f64> = pairs.iter().map(|(d, x)| (x - d) / d * 100.0).collect();
    let median = |v: Vec<f64>| xsched_report::quantile(&v, 0.5).unwrap_or(0.0);
    let loss = median(losses);
    let d = median(pairs.iter().map(|p| p.0).collect());
    let x = median(pairs.iter().map(|p| p.1).collect());
    let budget = options
        .config
        .inflight_budget()
        .map_or(json!(null), |b| json!(b.as_us_f64()));
    let row = cells(&[
        ("threshold", json!(name)),
        ("batch", json!(options.config.batch())),
        ("budget_us", budget),
        ("direct_ms", json!(round3(d))),
        ("xsched_ms", json!(round3(x))),
        ("loss_pct", json!(round3(loss))),
        (
            "direct_switches_per_cmd",
            json!(round3(per_command(runs.direct_switches))),
        ),
        (
            "xsched_switches_per_cmd",
            json!(round3(per_command(runs.xsched_switches))),
        ),
    ]);
    let check = (name == "8").then(|| Check {
        name: format!(
            "throughput loss at threshold 8, {} us commands",
            p.command.as_micros()
        ),
        target: "< 1 %".into(),
        measured: format!("{:.2} %", loss),
        verdict: Verdict::of(loss < 1.0),
    });
    Ok((row, check))
}

/// One configuration's runs: direct and xsched wall times in ms, run by run, and the context
/// switches of each side in all.
struct PairedRuns {
    pairs: Vec<(f64, f64)>,
    direct_switches: u64,
    xsched_switches: u64,
}

/// `p.repeats` direct runs, each followed by an xsched run on one queue with `options`.
fn alternate_runs(
    p: &OverheadParams,
    runtime: &Runtime,
    device: &CpuDevice,
    kernel: &Arc<Spin>,
    options: &QueueOptions,
) -> Result<PairedRuns, RuntimeError> {
    // Many short direct and xsched runs alternate and the loss is taken per adjacent pair,
    // so drifts of a shared machine's speed (several % over seconds) cancel; the median
    // pair is reported.
    // One queue per configuration, created (and its launcher thread started) before timing.
    let q = runtime.create_queue(Arc::new(device.create_queue()), *options)?;
    let mut pairs = Vec::new();
    let (mut direct_switches, mut xsched_switches) = (0u64, 0u64);
    for _ in 0..p.repeats {
        let (sd, d) = switches::during(|| direct(device, kernel, p.commands));
        let (sx, x) = switches::during(|| through_xqueue(&q, kernel, p.commands));
        direct_switches += sd;
        xsched_switches += sx;
        pairs.push((d.as_secs_f64() * 1e3, x?.as_secs_f64() * 1e3));
    }
    Ok(PairedRuns {
        pairs,
        direct_switches,
        xsched_switches,
    })
}

/// The row of the `submit` call's cost: its mean, P50 and P99 in ns.
fn submit_row(submit: &hdrhistogram::Histogram<u64>) -> xsched_report::Row {
    let mean_ns = submit.mean();
    cells(&[
        ("threshold", json!("submit call")),
        ("batch", json!(null)),
        ("budget_us", json!(null)),
        ("direct_ms", json!(null)),
        ("xsched_ms", json!(null)),
        (
            "loss_pct",
            json!(format!(
                "mean {:.0} ns, p50 {:.0} ns, p99 {:.0} ns",
                mean_ns,
                pct_us(submit, 0.5) * 1e3,
                pct_us(submit, 0.99) * 1e3
            )),
        ),
    ])
}
