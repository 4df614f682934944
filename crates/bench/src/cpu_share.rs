//! The scheduler's own CPU cost: on-CPU time of xsched's threads (the scheduler thread and the
//! launcher threads) as a share of one core, while idle and while a queue runs 10 k commands/s.
//! Read from Linux's per-thread `/proc/self/task/*/schedstat` (nanoseconds on CPU).

use crate::error::BenchError;
use crate::{Check, Report};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_report::{Verdict, cells, columns, round3};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig};

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct CpuShareParams {
    /// Length of each measured phase.
    pub phase: Duration,
    /// Commands per second in the busy phase.
    pub rate: u32,
    /// Length of each command in the busy phase.
    pub command: Duration,
}

impl Default for CpuShareParams {
    fn default() -> Self {
        CpuShareParams {
            phase: Duration::from_secs(3),
            rate: 10_000,
            command: Duration::from_micros(20),
        }
    }
}

/// On-CPU nanoseconds of this process's threads whose name starts with `prefix`, or `None`
/// where the kernel does not expose per-thread schedstat.
pub fn thread_cpu_ns(prefix: &str) -> Option<u64> {
    let mut total = 0;
    let mut seen = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        seen = true;
    }
    seen.then_some(total)
}

struct ThreadCpu {
    sched: u64,
    launch: u64,
    at: Instant,
}

fn sample() -> ThreadCpu {
    ThreadCpu {
        sched: thread_cpu_ns("xsched-sched").unwrap_or(0),
        launch: thread_cpu_ns("xsched-launch").unwrap_or(0),
        at: Instant::now(),
    }
}

fn shares(a: &ThreadCpu, b: &ThreadCpu) -> (f64, f64) {
    let wall = b.at.duration_since(a.at).as_nanos().max(1) as f64;
    (
        (b.sched.saturating_sub(a.sched)) as f64 / wall * 100.0,
        (b.launch.saturating_sub(a.launch)) as f64 / wall * 100.0,
    )
}

/// Rows `{phase, commands_per_s, scheduler_pct, launchers_pct}` (percent of one core).
pub fn run(p: &CpuShareParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    if thread_cpu_ns("").is_none() {
        return Err(BenchError::NoThreadCpuTime);
    }
    let device = CpuDevice::new(1)?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let fg = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::default())?;
    let _other = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::default())?;
    progress(0, 2);
    let a = sample();
    std::thread::sleep(p.phase);
    let b = sample();
    let (idle_sched, idle_launch) = shares(&a, &b);
    progress(1, 2);

    let kernel = Arc::new(Spin::new(p.command));
    let per_ms = (p.rate / 1000).max(1);
    let start = Instant::now();
    let c = sample();
    let mut submitted = 0u64;
    let mut tick = 0u32;
    while start.elapsed() < p.phase {
        tick += 1;
        for _ in 0..per_ms {
            fg.submit(CpuCommand::Kernel(kernel.clone()))?;
            submitted += 1;
        }
        std::thread::sleep(
            (start + Duration::from_millis(u64::from(tick)))
                .saturating_duration_since(Instant::now()),
        );
    }
    let _ = fg.wait_all();
    let d = sample();
    let (busy_sched, busy_launch) = shares(&c, &d);
    let rate = submitted as f64 / d.at.duration_since(c.at).as_secs_f64();
    progress(2, 2);
    let rows = vec![
        cells(&[
            ("phase", json!("idle")),
            ("commands_per_s", json!(0)),
            ("scheduler_pct", json!(round3(idle_sched))),
            ("launchers_pct", json!(round3(idle_launch))),
        ]),
        cells(&[
            ("phase", json!("busy")),
            ("commands_per_s", json!(rate.round())),
            ("scheduler_pct", json!(round3(busy_sched))),
            ("launchers_pct", json!(round3(busy_launch))),
        ]),
    ];
    let checks = vec![Check {
        name: "scheduler thread CPU at the busy rate".into(),
        target: "< 5 % of one core (XSched: mostly < 5 %)".into(),
        measured: format!("{busy_sched:.2} % (launcher threads: {busy_launch:.2} %)"),
        verdict: Verdict::of(busy_sched < 5.0),
    }];
    Ok(Report {
        experiment: "cpu-share (cpu device)".into(),
        columns: columns(&["phase", "commands_per_s", "scheduler_pct", "launchers_pct"]),
        rows,
        checks,
        events: None,
    })
}
