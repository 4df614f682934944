//! Foreground requests beside a saturating background on one CPU device: standalone, native
//! and xsched at each level. This is `xsched demo`.
//!
//! The foreground is an open-loop inference stream: each request is a few kernels, arrivals are
//! periodic with random jitter, and latency runs from the *scheduled* arrival to the observed
//! completion (queueing counted). The background is a training loop: iterations of several
//! long kernels, each iteration waited for before the next. Natively both feed the device's one
//! hardware FIFO, so a request waits behind whatever the background already launched; under
//! xsched (fixed priority, foreground higher) the background is suspended while the foreground
//! has work, at the chosen level.

use crate::Report;
use crate::error::BenchError;
use crate::stats::{self, none, pct_us};
use hdrhistogram::Histogram;
use rand::Rng;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Hint, Level};
use xsched_report::{cells, columns, round3};
use xsched_runtime::{
    CommandHandle, QueueAccount, QueueOptions, QueueState, Runtime, RuntimeConfig, XQueue,
};
use xsched_workload::fg_bg::{self, CPU_INTERRUPT_MAX};

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct FgBgParams {
    /// Kernels per foreground request.
    pub fg_kernels: u32,
    /// Length of each foreground kernel.
    pub fg_kernel: Duration,
    /// Mean time between foreground arrivals (jittered by ±25 %).
    pub fg_period: Duration,
    /// Measured foreground requests per mode.
    pub requests: u32,
    /// The modes run interleaved in this many rounds (each measures `requests / rounds`), so a
    /// burst of machine noise spreads over all modes instead of spoiling one.
    pub rounds: u32,
    /// Requests run first and not measured.
    pub warmup: u32,
    /// Length of each background kernel.
    pub bg_kernel: Duration,
    /// Background kernels per training iteration.
    pub bg_iteration: u32,
    /// Device worker threads.
    pub workers: usize,
    /// Levels to run xsched at.
    pub levels: Vec<Level>,
    /// Seed of the arrival jitter.
    pub seed: u64,
    /// Sample both queues' states this often during the measured window (for a timeline);
    /// `None`: no samples.
    pub timeline: Option<Duration>,
}

impl Default for FgBgParams {
    /// About 17 s in all: 400 requests of 4 × 500 µs every 8 ms (25 % load) beside
    /// iterations of 8 × 1 ms background kernels, on one worker.
    fn default() -> Self {
        FgBgParams {
            fg_kernels: 4,
            fg_kernel: Duration::from_micros(500),
            fg_period: Duration::from_millis(8),
            requests: 400,
            rounds: 4,
            warmup: 10,
            bg_kernel: Duration::from_millis(1),
            bg_iteration: 8,
            workers: 1,
            levels: Level::ALL.to_vec(),
            seed: 1,
            timeline: None,
        }
    }
}

pub use xsched_workload::fg_bg::ShareMode;

/// What one run measured.
#[derive(Debug)]
pub struct RunResult {
    /// Foreground request latency (ns).
    pub latency: Histogram<u64>,
    /// Fraction of the measured window the device spent on background kernels.
    pub bg_device_share: f64,
    /// The foreground queue's accounting over the measured window (its maxima over its life).
    pub fg_account: QueueAccount,
    /// The background queue's, if it ran.
    pub bg_account: Option<QueueAccount>,
    /// The queues' states every [`FgBgParams::timeline`], from the start of the measured window.
    pub timeline: Vec<QueueSample>,
}

/// Both queues' states at one moment of the measured window.
#[derive(Clone, Copy, Debug)]
pub struct QueueSample {
    /// Since the measured window began.
    pub at: Duration,
    /// The foreground queue.
    pub fg: QueueState,
    /// The background queue, if it runs.
    pub bg: Option<QueueState>,
}

/// Run one mode.
pub fn run_mode(p: &FgBgParams, mode: ShareMode) -> Result<RunResult, BenchError> {
    let (fg_options, bg_options) = match mode {
        ShareMode::Standalone | ShareMode::Native => {
            (QueueOptions::native(), QueueOptions::native())
        }
        ShareMode::XSched(level) => {
            let o = QueueOptions::default().with_level(level);
            (
                o.with_hint(Hint::Priority(1))?,
                o.with_hint(Hint::Priority(0))?,
            )
        }
    };
    let bg_options = (mode != ShareMode::Standalone).then_some(bg_options);
    run_options(p, fg_options, bg_options)
}

/// Run the foreground with `fg_options` beside, unless `None`, the background with
/// `bg_options`, both on one in-process runtime.
pub fn run_options(
    p: &FgBgParams,
    fg_options: QueueOptions,
    bg_options: Option<QueueOptions>,
) -> Result<RunResult, BenchError> {
    let device = CpuDevice::new(p.workers)?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let fg = runtime.create_queue(Arc::new(device.create_queue()), fg_options)?;
    let bg = match bg_options {
        None => None,
        Some(o) => Some(runtime.create_queue(Arc::new(device.create_queue()), o)?),
    };
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let bg_done = AtomicU64::new(0);
    let mut window = (Instant::now(), 0u64);
    let mut accounts_at_start = (QueueAccount::default(), None);
    let (latency, elapsed, bg_commands, timeline) = std::thread::scope(|s| {
        if let Some(bg) = &bg {
            s.spawn(|| background(bg, p, &stop, &bg_done));
        }
        let sampler = p.timeline.map(|every| {
            let (fg, bg, measuring, stop) = (&fg, bg.as_ref(), &measuring, &stop);
            s.spawn(move || sample(fg, bg, every, measuring, stop))
        });
        let latency = foreground(&fg, p, || {
            window = (Instant::now(), bg_done.load(Ordering::Relaxed));
            accounts_at_start = (fg.account(), bg.as_ref().map(XQueue::account));
            measuring.store(true, Ordering::Relaxed);
        });
        let measured = (
            window.0.elapsed().as_secs_f64(),
            bg_done.load(Ordering::Relaxed) - window.1,
        );
        stop.store(true, Ordering::Relaxed);
        let timeline = sampler
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        (latency, measured.0, measured.1, timeline)
    });
    let bg_work = bg_commands as f64 * p.bg_kernel.as_secs_f64() / p.workers as f64;
    Ok(RunResult {
        latency,
        bg_device_share: if elapsed > 0.0 {
            bg_work / elapsed
        } else {
            0.0
        },
        fg_account: fg.account().since(&accounts_at_start.0),
        bg_account: bg
            .as_ref()
            .map(|b| b.account().since(&accounts_at_start.1.unwrap_or_default())),
        timeline,
    })
}

/// The queues' states every `every` while `measuring`, until `stop`.
fn sample(
    fg: &XQueue<CpuQueue>,
    bg: Option<&XQueue<CpuQueue>>,
    every: Duration,
    measuring: &AtomicBool,
    stop: &AtomicBool,
) -> Vec<QueueSample> {
    let mut samples = Vec::new();
    while !measuring.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(every);
    }
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        samples.push(QueueSample {
            at: start.elapsed(),
            fg: fg.query(),
            bg: bg.map(XQueue::query),
        });
        std::thread::sleep(every);
    }
    samples
}

/// The background's training loop: iterations of `bg_iteration` kernels, each iteration waited
/// for, until `stop`; completed kernels are counted in `done`.
pub fn background(bg: &XQueue<CpuQueue>, p: &FgBgParams, stop: &AtomicBool, done: &AtomicU64) {
    let kernel: Arc<Spin> = Arc::new(Spin::new(p.bg_kernel));
    while !stop.load(Ordering::Relaxed) {
        let mut last = None;
        for _ in 0..p.bg_iteration {
            last = bg.submit(CpuCommand::Kernel(kernel.clone())).ok();
        }
        if let Some(h) = last
            && h.wait().is_ok()
        {
            done.fetch_add(u64::from(p.bg_iteration), Ordering::Relaxed);
        }
    }
    let _ = bg.cancel_pending();
}

/// The foreground's open-loop request stream: `warmup + requests` requests of `fg_kernels`
/// kernels at jittered periodic arrivals. `measuring` is called when the measured requests
/// begin. Returns the measured latencies (scheduled arrival → observed completion, ns).
pub fn foreground(
    fg: &XQueue<CpuQueue>,
    p: &FgBgParams,
    mut measuring: impl FnMut(),
) -> Histogram<u64> {
    let kernel: Arc<Spin> = Arc::new(Spin::new(p.fg_kernel));
    let mut rng = stats::rng(p.seed);
    let (tx, rx) = crossbeam_channel::unbounded::<(Instant, CommandHandle, bool)>();
    std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            let mut h = xsched_report::new_histogram();
            for (arrival, handle, measured) in rx {
                let _ = handle.wait();
                if measured {
                    xsched_report::record_duration(
                        &mut h,
                        Instant::now().saturating_duration_since(arrival),
                    );
                }
            }
            h
        });
        let start = Instant::now() + Duration::from_millis(20);
        let quarter = p.fg_period / 4;
        for i in 0..p.warmup + p.requests {
            // Period ± 25 %: a random offset of 0 to half a period from a grid point.
            let arrival = start + p.fg_period * i + quarter.mul_f64(rng.random_range(0.0..2.0));
            std::thread::sleep(arrival.saturating_duration_since(Instant::now()));
            if i == p.warmup {
                measuring();
            }
            let mut last = None;
            for _ in 0..p.fg_kernels {
                last = fg.submit(CpuCommand::Kernel(kernel.clone())).ok();
            }
            if let Some(h) = last {
                let _ = tx.send((arrival, h, i >= p.warmup));
            }
        }
        drop(tx);
        match waiter.join() {
            Ok(h) => h,
            // A broken benchmark must not report an empty histogram as a result.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Run standalone, native, and xsched at each level, interleaved in rounds; rows
/// `{mode, level, p50_us, p99_us, p99_runs_ms, p99_ratio, bg_device_share}`.
///
/// Each round runs every mode once, starting one mode later than the round before, so no mode
/// (standalone least of all: it is the baseline) always runs first, on a cold machine, or
/// always after the same neighbour. Each mode's P99 pools all its rounds; the rounds' own P99s
/// are the baseline's spread ([`fg_bg::Baseline`]).
pub fn run(p: &FgBgParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let modes = ShareMode::all(&p.levels);
    let rounds = p.rounds.clamp(1, p.requests.max(1));
    let per_round = FgBgParams {
        requests: p.requests.div_ceil(rounds),
        ..p.clone()
    };
    let mut merged: Vec<(Histogram<u64>, Vec<f64>, f64)> = modes
        .iter()
        .map(|_| (xsched_report::new_histogram(), Vec::new(), 0.0))
        .collect();
    let total = modes.len() * rounds as usize;
    for round in 0..rounds as usize {
        for k in 0..modes.len() {
            let i = (round + k) % modes.len();
            progress(round * modes.len() + k, total);
            let r = run_mode(
                &FgBgParams {
                    seed: p.seed + round as u64,
                    ..per_round.clone()
                },
                modes[i],
            )?;
            let (h, runs, share) = &mut merged[i];
            let _ = h.add(&r.latency);
            runs.push(pct_us(&r.latency, 0.99));
            *share += r.bg_device_share / f64::from(rounds);
        }
    }
    progress(total, total);
    Ok(report(
        "fg-bg (cpu device)",
        &modes
            .iter()
            .zip(merged)
            .map(|(&m, (h, runs_p99_us, share))| ModeResult {
                mode: m,
                p50_us: pct_us(&h, 0.5),
                p99_us: pct_us(&h, 0.99),
                runs_p99_us,
                bg_device_share: share,
            })
            .collect::<Vec<_>>(),
    ))
}

/// What one mode measured, for the report.
#[derive(Clone, Debug)]
pub struct ModeResult {
    /// The mode.
    pub mode: ShareMode,
    /// Foreground latency P50 (µs), over all its runs.
    pub p50_us: f64,
    /// Foreground latency P99 (µs), over all its runs.
    pub p99_us: f64,
    /// Each run's own P99 (µs), in the order they ran.
    pub runs_p99_us: Vec<f64>,
    /// Fraction of the device the background got.
    pub bg_device_share: f64,
}

/// The rows `{device, mode, level, p50_us, p99_us, p99_runs_ms, p99_ratio, bg_device_share}`
/// and the checks: the standalone baseline's steadiness, then the Level-3 target judged against
/// it (standalone first in `results`).
pub fn report(experiment: &str, results: &[ModeResult]) -> Report {
    let baseline = results
        .iter()
        .find(|r| r.mode == ShareMode::Standalone)
        .map(|r| fg_bg::Baseline {
            p99_us: r.p99_us,
            runs_us: r.runs_p99_us.clone(),
        });
    let mut rows = Vec::new();
    let mut checks: Vec<_> = baseline.iter().map(|b| b.check("cpu")).collect();
    for r in results {
        let ratio = match &baseline {
            Some(b) if b.p99_us > 0.0 => round3(r.p99_us / b.p99_us),
            _ => 0.0,
        };
        if let (ShareMode::XSched(Level::Interrupt), Some(b)) = (r.mode, &baseline) {
            checks.push(b.xsched_check("cpu", Level::Interrupt, ratio, CPU_INTERRUPT_MAX));
        }
        rows.push(cells(&[
            ("device", json!("cpu")),
            ("mode", json!(r.mode.name())),
            (
                "level",
                r.mode.level().map_or_else(none, |l| json!(l.number())),
            ),
            ("p50_us", json!(r.p50_us)),
            ("p99_us", json!(r.p99_us)),
            ("p99_runs_ms", json!(runs_ms(&r.runs_p99_us))),
            ("p99_ratio", json!(ratio)),
            ("bg_device_share", json!(round3(r.bg_device_share))),
        ]));
    }
    Report {
        experiment: experiment.into(),
        columns: columns(&[
            "device",
            "mode",
            "level",
            "p50_us",
            "p99_us",
            "p99_runs_ms",
            "p99_ratio",
            "bg_device_share",
        ]),
        rows,
        checks,
        events: None,
    }
}

/// Each run's P99 in milliseconds, two decimals, for the table: `2.31 2.45 2.60 2.38`.
fn runs_ms(runs_us: &[f64]) -> String {
    let ms: Vec<String> = runs_us
        .iter()
        .map(|us| format!("{:.2}", us / 1000.0))
        .collect();
    ms.join(" ")
}
