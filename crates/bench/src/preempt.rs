//! Preemption latency on the CPU device against command length, per level, measured the way
//! the papers do: under a saturating background of commands of length T, at a random moment
//! an urgent (higher-priority) queue submits a command; the latency is the time from that
//! submission until the urgent command starts on the device. Beside it, the machine's raw
//! thread wake-up round trip, measured in the same run, is the floor.

use crate::error::BenchError;
use crate::stats::{self, none, pct_us};
use crate::{Check, Report};
use hdrhistogram::Histogram;
use rand::Rng;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::{DEFAULT_CHECKPOINT, Spin};
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::{Hint, LaunchConfig, Level};
use xsched_report::{Verdict, cells, columns};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError};

/// One configuration of the background queue.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Name in the table.
    pub name: &'static str,
    /// Level.
    pub level: Level,
    /// Launch config.
    pub config: LaunchConfig,
}

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct PreemptParams {
    /// Background command lengths.
    pub lengths: Vec<Duration>,
    /// Background queue configurations.
    pub variants: Vec<Variant>,
    /// Samples per (variant, length); the papers use at least 300.
    pub samples: u32,
    /// Seed of the random moments.
    pub seed: u64,
}

impl Default for PreemptParams {
    fn default() -> Self {
        let count_only = LaunchConfig::new(8, 4).unwrap_or(LaunchConfig::DEFAULT);
        let default = QueueOptions::default().config;
        PreemptParams {
            lengths: [100, 200, 500, 1000, 2000]
                .into_iter()
                .map(Duration::from_micros)
                .collect(),
            variants: vec![
                Variant {
                    name: "L1 threshold 8, no budget",
                    level: Level::Block,
                    config: count_only,
                },
                Variant {
                    name: "L1 default",
                    level: Level::Block,
                    config: default,
                },
                Variant {
                    name: "L2 default",
                    level: Level::Deactivate,
                    config: default,
                },
                Variant {
                    name: "L3 default",
                    level: Level::Interrupt,
                    config: default,
                },
            ],
            samples: 300,
            seed: 1,
        }
    }
}

/// Latency samples for one background configuration and command length.
pub fn measure(
    variant: Variant,
    length: Duration,
    samples: u32,
    seed: u64,
) -> Result<Histogram<u64>, BenchError> {
    let device = CpuDevice::new(1)?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let bg_options = QueueOptions::default()
        .with_level(variant.level)
        .with_config(variant.config)
        .with_hint(Hint::Priority(0))?;
    let fg_options = QueueOptions::default().with_hint(Hint::Priority(1))?;
    let bg = runtime.create_queue(Arc::new(device.create_queue()), bg_options)?;
    let fg = runtime.create_queue(Arc::new(device.create_queue()), fg_options)?;
    let kernel = Arc::new(Spin::new(length));
    let stop = AtomicBool::new(false);
    let mut rng = stats::rng(seed);
    let mut hist = xsched_report::new_histogram();
    std::thread::scope(|s| -> Result<(), RuntimeError> {
        s.spawn(|| {
            // Keep the background saturated: always plenty submitted and not yet done.
            let mut outstanding = VecDeque::new();
            while !stop.load(Ordering::Relaxed) {
                match bg.submit(CpuCommand::Kernel(kernel.clone())) {
                    Ok(h) => outstanding.push_back(h),
                    Err(_) => return,
                }
                if outstanding.len() > 32
                    && let Some(h) = outstanding.pop_front()
                {
                    let _ = h.wait();
                }
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..samples {
            // A random moment in the background's stream.
            std::thread::sleep(length.mul_f64(rng.random_range(1.0..3.0)));
            let started = Arc::new(Mutex::new(None));
            let mark = started.clone();
            let asked = Instant::now();
            let h = fg.submit(CpuCommand::host(move || {
                if let Ok(mut m) = mark.lock() {
                    *m = Some(Instant::now());
                }
            }))?;
            let _ = h.wait();
            let at = started.lock().ok().and_then(|m| *m);
            if let Some(at) = at {
                xsched_report::record_duration(&mut hist, at.saturating_duration_since(asked));
            }
        }
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    bg.cancel_pending()?;
    Ok(hist)
}

/// Round trip of a wake-up between two threads over a channel: the floor of any preemption
/// that needs another thread to act.
pub fn wakeup_round_trip(samples: u32) -> Histogram<u64> {
    let (ping_tx, ping_rx) = crossbeam_channel::bounded::<()>(0);
    let (pong_tx, pong_rx) = crossbeam_channel::bounded::<()>(0);
    let echo = std::thread::spawn(move || {
        while ping_rx.recv().is_ok() {
            if pong_tx.send(()).is_err() {
                return;
            }
        }
    });
    let mut hist = xsched_report::new_histogram();
    for _ in 0..samples {
        // Let the echo thread fall asleep, as a launcher or worker would be.
        std::thread::sleep(Duration::from_micros(200));
        let t = Instant::now();
        if ping_tx.send(()).is_err() || pong_rx.recv().is_err() {
            break;
        }
        xsched_report::record_duration(&mut hist, t.elapsed());
    }
    drop(ping_tx);
    let _ = echo.join();
    hist
}

/// Every variant at every length, plus the floor; rows
/// `{level, config, cmd_us, p50_us, p99_us, p99_over_cmd}`.
pub fn run(p: &PreemptParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let total = p.variants.len() * p.lengths.len() + 1;
    progress(0, total);
    let floor = wakeup_round_trip(p.samples.max(100));
    let floor_p99 = pct_us(&floor, 0.99);
    let mut rows = vec![cells(&[
        ("level", json!("floor")),
        ("config", json!("thread wake-up round trip")),
        ("cmd_us", none()),
        ("p50_us", json!(pct_us(&floor, 0.5))),
        ("p99_us", json!(floor_p99)),
        ("p99_over_cmd", none()),
    ])];
    let mut checks = Vec::new();
    let mut done = 1;
    for v in &p.variants {
        let mut l3_p99 = Vec::new();
        for (i, &len) in p.lengths.iter().enumerate() {
            progress(done, total);
            let h = measure(*v, len, p.samples, p.seed + i as u64)?;
            let cmd_us = len.as_secs_f64() * 1e6;
            let p99 = pct_us(&h, 0.99);
            if v.level == Level::Interrupt {
                l3_p99.push(p99);
            }
            rows.push(cells(&[
                ("level", json!(v.level.number())),
                ("config", json!(v.name)),
                ("cmd_us", json!(cmd_us)),
                ("p50_us", json!(pct_us(&h, 0.5))),
                ("p99_us", json!(p99)),
                ("p99_over_cmd", json!(xsched_report::round3(p99 / cmd_us))),
            ]));
            done += 1;
        }
        if !l3_p99.is_empty() {
            let worst = l3_p99.iter().copied().fold(0.0, f64::max);
            let bound = DEFAULT_CHECKPOINT.as_secs_f64() * 1e6 + floor_p99;
            checks.push(Check {
                name: format!(
                    "{}: P99 bounded by one checkpoint + one wake-up, flat in T",
                    v.name
                ),
                target: format!("<= {bound:.0} us (50 us checkpoint + floor P99)"),
                measured: format!("worst P99 {worst} us over T"),
                verdict: Verdict::of(worst <= bound),
            });
        }
    }
    progress(total, total);
    Ok(Report {
        experiment: "preempt-latency (cpu device)".into(),
        columns: columns(&[
            "level",
            "config",
            "cmd_us",
            "p50_us",
            "p99_us",
            "p99_over_cmd",
        ]),
        rows,
        checks,
        events: None,
    })
}
