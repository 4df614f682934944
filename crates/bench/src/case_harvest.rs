//! XSched's GPU-harvesting case study on the built-in CPU device: the simulated study's
//! workloads (`scenarios/xsched-case-harvest.toml`) with real threads and spin kernels on one
//! worker, at the GV100 study's time scale:
//!
//! - the *production* service: Poisson requests at 75 % of the device, each 12 kernels of
//!   300–700 µs (6 ms, the GV100's 6.55 ms ResNet-152 request in kernels the CPU device runs
//!   with little launch overhead);
//! - the *opportunistic* job, back to back: a training loop (iterations of 100 kernels of
//!   100–900 µs and a 2 ms CPU step) or a financial-computing stream (batches of 4 kernels of
//!   5–15 ms).
//!
//! Modes as in the simulated study: the service alone, both native (the device's one FIFO),
//! the vCUDA-like quota and TGS-like rate (the core's `quota:SHARE` and `tgs`, which only hold
//! back the job's launches: Level 1), and xsched with fixed priority and SLO-aware harvesting
//! at each level asked (Level 3, the device's tile checkpoints, stands for the GV100; Level 1
//! for the MI50). Every mode replays the same seeded requests. Measured: the job's completed
//! kernel time over the window (harvested share) and the service's mean and P99 latency.

use crate::Report;
use crate::error::BenchError;
use crate::poisson::{ServiceLoad, length, nanos, serve};
use crate::stats::{pct_us, spread};
use hdrhistogram::Histogram;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Hint, Level, PolicySpec};
use xsched_report::plot::Figure;
use xsched_report::{cells, columns, round3};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError, XQueue};
use xsched_workload::SeededRng;
use xsched_workload::harvest_case::{self, LpJob, MODES, ModeResult, ShareMode};

/// What the study runs.
#[derive(Clone, Debug)]
pub struct CaseHarvestParams {
    /// The levels xsched's modes run at (one set of rows each).
    pub levels: Vec<Level>,
    /// The opportunistic jobs.
    pub jobs: Vec<LpJob>,
    /// The service's share of the device alone (sets its request rate).
    pub production_load: f64,
    /// Kernels per service request, and their length range.
    pub production_kernels: u32,
    /// Shortest and longest service kernel.
    pub production_kernel: (Duration, Duration),
    /// Training: kernels per iteration, their length range, the CPU step between iterations.
    pub training_kernels: u32,
    /// Shortest and longest training kernel.
    pub training_kernel: (Duration, Duration),
    /// The CPU step between training iterations.
    pub training_cpu: Duration,
    /// Financial: kernels per batch and their length range.
    pub financial_kernels: u32,
    /// Shortest and longest financial kernel.
    pub financial_kernel: (Duration, Duration),
    /// The quota's share for the job.
    pub quota_share: f64,
    /// The SLO-aware mode's SLO over the service's standalone P99.
    pub slo_factor: f64,
    /// Warm-up (the TGS-like controller's probe and climb) and measured time per run.
    pub warmup: Duration,
    /// Measured time per run.
    pub measure: Duration,
    /// Runs of every mode, interleaved (the report gives the median and the spread).
    pub runs: u32,
    /// Seed of the service's arrivals and every kernel length.
    pub seed: u64,
}

impl Default for CaseHarvestParams {
    /// The simulated study's GV100 shapes, Levels 3 and 1, 5 s measured, 3 runs: about 9
    /// minutes.
    fn default() -> Self {
        let us = Duration::from_micros;
        CaseHarvestParams {
            levels: vec![Level::Interrupt, Level::Block],
            jobs: vec![LpJob::Training, LpJob::Financial],
            production_load: 0.75,
            production_kernels: 12,
            production_kernel: (us(300), us(700)),
            training_kernels: 100,
            training_kernel: (us(100), us(900)),
            training_cpu: Duration::from_millis(2),
            financial_kernels: 4,
            financial_kernel: (us(5000), us(15000)),
            quota_share: 0.2,
            slo_factor: 1.5,
            warmup: Duration::from_millis(1500),
            measure: Duration::from_secs(5),
            runs: 3,
            seed: 1,
        }
    }
}

/// What one run of one mode measured.
#[derive(Debug)]
pub struct RunResult {
    /// The service's request latencies (ns), requests arrived in the window.
    pub latency: Histogram<u64>,
    /// The job's completed kernel time in the window over the window.
    pub harvested: f64,
}

/// The production service of `p`: Poisson arrivals at its load.
fn production(p: &CaseHarvestParams) -> ServiceLoad {
    let mut s = ServiceLoad {
        kernels: p.production_kernels,
        kernel: p.production_kernel,
        mean_gap: Duration::ZERO,
        seed: p.seed,
    };
    s.mean_gap = s.mean_request().div_f64(p.production_load.max(1e-3));
    s
}

/// Queue options of the service and of the job in `mode`, xsched's at `level`.
fn options(
    mode: ShareMode,
    level: Level,
    slo: Duration,
) -> Result<(QueueOptions, QueueOptions), RuntimeError> {
    let level = if mode.preempts() { level } else { Level::Block };
    Ok(match mode {
        ShareMode::Standalone | ShareMode::Native => {
            (QueueOptions::native(), QueueOptions::native())
        }
        _ => {
            let o = QueueOptions::default().with_level(level);
            let mut prod = o.with_hint(Hint::Priority(1))?;
            if mode == ShareMode::SloAware {
                prod = prod.with_hint(Hint::Slo(nanos(slo.max(Duration::from_micros(1)))))?;
            }
            (prod, o.with_hint(Hint::Priority(0))?)
        }
    })
}

/// Run one mode once with `job` beside the service; `slo` for the SLO-aware mode.
pub fn run_mode(
    p: &CaseHarvestParams,
    mode: ShareMode,
    level: Level,
    job: LpJob,
    slo: Duration,
) -> Result<RunResult, BenchError> {
    let device = CpuDevice::new(1)?;
    let runtime = Runtime::new(RuntimeConfig {
        policy: mode
            .policy(p.quota_share)?
            .unwrap_or_else(|| PolicySpec::registered("fcfs")),
        ..RuntimeConfig::default()
    })?;
    let (prod_options, job_options) = options(mode, level, slo)?;
    let prod = runtime.create_queue(Arc::new(device.create_queue()), prod_options)?;
    let opportunistic = match mode {
        ShareMode::Standalone => None,
        _ => Some(runtime.create_queue(Arc::new(device.create_queue()), job_options)?),
    };
    let start = Instant::now() + Duration::from_millis(20);
    let from = start + p.warmup;
    let end = from + p.measure;
    std::thread::scope(|s| {
        let job_run = opportunistic
            .as_ref()
            .map(|q| s.spawn(move || run_job(q, p, job, from, end)));
        let latency = serve(&prod, &production(p), start, from, end);
        let harvested = match job_run.map(|h| h.join()) {
            Some(Ok(work)) => work.as_secs_f64() / p.measure.as_secs_f64(),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => 0.0,
        };
        Ok(RunResult { latency, harvested })
    })
}

/// The job, back to back until `end`: the kernel time of its batches completed after `from`.
fn run_job(
    q: &XQueue<CpuQueue>,
    p: &CaseHarvestParams,
    job: LpJob,
    from: Instant,
    end: Instant,
) -> Duration {
    let (kernels, range, cpu) = match job {
        LpJob::Training => (p.training_kernels, p.training_kernel, p.training_cpu),
        LpJob::Financial => (p.financial_kernels, p.financial_kernel, Duration::ZERO),
    };
    let mut rng = SeededRng::new(p.seed ^ 0x5EED);
    let mut done = Duration::ZERO;
    while Instant::now() < end {
        let mut work = Duration::ZERO;
        let mut last = None;
        for _ in 0..kernels {
            let len = length(&mut rng, range);
            work += len;
            last = q.submit(CpuCommand::Kernel(Arc::new(Spin::new(len)))).ok();
        }
        let Some(h) = last else { break };
        let _ = h.wait();
        let now = Instant::now();
        if now >= from && now <= end {
            done += work;
        }
        std::thread::sleep(cpu);
    }
    done
}

/// Every level, job and mode `runs` times, interleaved; rows with the medians and spreads, and
/// the trade-off figure over every (level, job).
pub fn run(
    p: &CaseHarvestParams,
    progress: &dyn Fn(usize, usize),
) -> Result<(Report, Vec<Figure>), BenchError> {
    let runs = p.runs.max(1) as usize;
    let cases: Vec<(Level, LpJob)> = p
        .levels
        .iter()
        .flat_map(|l| p.jobs.iter().map(move |j| (*l, *j)))
        .collect();
    let total = runs * (1 + cases.len() * (MODES.len() - 1));
    let mut step = 0;
    // results[case][mode][run]; standalone is shared by every case.
    let mut alone = Vec::new();
    let mut results: Vec<Vec<Vec<RunResult>>> = cases
        .iter()
        .map(|_| MODES.iter().map(|_| Vec::new()).collect())
        .collect();
    for _ in 0..runs {
        progress(step, total);
        step += 1;
        let first = p.levels.first().copied().unwrap_or(Level::Block);
        alone.push(run_mode(
            p,
            ShareMode::Standalone,
            first,
            LpJob::Training,
            Duration::ZERO,
        )?);
        let slo = Duration::from_nanos(
            (pct_us(&alone[alone.len() - 1].latency, 0.99) * 1e3 * p.slo_factor) as u64,
        );
        for (c, &(level, job)) in cases.iter().enumerate() {
            for (i, &mode) in MODES.iter().enumerate().skip(1) {
                progress(step, total);
                step += 1;
                results[c][i].push(run_mode(p, mode, level, job, slo)?);
            }
        }
    }
    progress(total, total);
    Ok(report(&cases, alone, results))
}

fn mean_ms(r: &RunResult) -> f64 {
    r.latency.mean() / 1e6
}

/// The report: a row per level, job and mode, the study's checks per (level, job), and the
/// trade-off figure.
fn report(
    cases: &[(Level, LpJob)],
    alone: Vec<RunResult>,
    results: Vec<Vec<Vec<RunResult>>>,
) -> (Report, Vec<Figure>) {
    let base = spread(alone.iter().map(mean_ms).collect()).0;
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let mut points: Vec<Vec<ModeResult>> = MODES.iter().map(|_| Vec::new()).collect();
    for (c, &(level, job)) in cases.iter().enumerate() {
        let mut outcomes = [ModeResult {
            harvested: 0.0,
            slowdown: 0.0,
        }; 6];
        for (i, mode) in MODES.iter().enumerate() {
            let rs = if i == 0 { &alone } else { &results[c][i] };
            let (row, outcome) = mode_row(level, job, *mode, rs, base);
            outcomes[i] = outcome;
            if i > 0 {
                points[i].push(outcomes[i]);
            }
            rows.push(row);
        }
        checks.extend(harvest_case::checks(
            &format!("cpu L{} {}", level.number(), job.name()),
            &outcomes,
            0.02,
        ));
    }
    let figure = harvest_case::tradeoff_figure(
        "case-harvest-cpu-tradeoff",
        "GPU harvesting on the CPU device: harvested share against production slowdown".into(),
        &points,
    );
    let report = Report {
        experiment: "case-harvest (cpu device)".into(),
        columns: columns(&[
            "level",
            "job",
            "mode",
            "mode_level",
            "harvested_share",
            "harvested_min",
            "harvested_max",
            "prod_mean_ms",
            "mean_min_ms",
            "mean_max_ms",
            "prod_p99_ms",
            "prod_slowdown_pct",
        ]),
        rows,
        checks,
        events: None,
    };
    (report, vec![figure])
}

/// One mode's row for `level` and `job` from its runs `rs`, and its outcome: the median
/// harvested share, and the median mean latency's slowdown over `base` (the service alone's).
fn mode_row(
    level: Level,
    job: LpJob,
    mode: ShareMode,
    rs: &[RunResult],
    base: f64,
) -> (xsched_report::Row, ModeResult) {
    let (mean, lo, hi) = spread(rs.iter().map(mean_ms).collect());
    let (harvested, h_lo, h_hi) = spread(rs.iter().map(|r| r.harvested).collect());
    let p99 = spread(
        rs.iter()
            .map(|r| pct_us(&r.latency, 0.99) / 1000.0)
            .collect(),
    )
    .0;
    let outcome = ModeResult {
        harvested,
        slowdown: mean / base - 1.0,
    };
    let shown_level = match mode {
        ShareMode::Standalone | ShareMode::Native => None,
        m if m.preempts() => Some(level.number()),
        _ => Some(Level::Block.number()),
    };
    let row = cells(&[
        ("level", json!(level.number())),
        ("job", json!(job.name())),
        ("mode", json!(mode.name())),
        ("mode_level", json!(shown_level)),
        ("harvested_share", json!(round3(harvested))),
        ("harvested_min", json!(round3(h_lo))),
        ("harvested_max", json!(round3(h_hi))),
        ("prod_mean_ms", json!(round3(mean))),
        ("mean_min_ms", json!(round3(lo))),
        ("mean_max_ms", json!(round3(hi))),
        ("prod_p99_ms", json!(round3(p99))),
        ("prod_slowdown_pct", json!(round3(100.0 * outcome.slowdown))),
    ]);
    (row, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_of_every_mode_reports_its_rows() {
        let ms = Duration::from_millis;
        let p = CaseHarvestParams {
            levels: vec![Level::Block],
            jobs: vec![LpJob::Financial],
            financial_kernel: (ms(2), ms(3)),
            warmup: ms(700),
            measure: ms(300),
            runs: 1,
            ..CaseHarvestParams::default()
        };
        let (r, figures) = run(&p, &|_, _| {}).expect("runs");
        assert_eq!(r.rows.len(), MODES.len());
        assert_eq!(figures[0].series.len(), MODES.len() - 1);
        for (row, mode) in r.rows.iter().zip(MODES) {
            assert_eq!(row["mode"], mode.name());
            let mean = row["prod_mean_ms"].as_f64().unwrap_or(0.0);
            assert!(
                mean >= 5.0,
                "a request is 12 kernels of 300-700 us: {row:?}"
            );
            let harvested = row["harvested_share"].as_f64().unwrap_or(-1.0);
            if mode == ShareMode::Standalone {
                assert_eq!(harvested, 0.0);
            } else {
                assert!((0.0..=1.0).contains(&harvested), "{row:?}");
            }
        }
        assert_eq!(r.checks.len(), 2, "the simulated study's checks");
    }
}
