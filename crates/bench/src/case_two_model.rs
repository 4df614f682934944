//! XSched's two-model serving case study on the built-in CPU device: the simulated study's
//! workload (`scenarios/xsched-case-two-model.toml`) with real threads and spin kernels on one
//! worker, time scaled up tenfold so that the kernels are long against the CPU device's launch
//! cost: two services of requests of 40 kernels of 100–300 µs (8 ms), Poisson at half the
//! total rate each, at total rates of 20–100 req/s (the simulated 200–1 000 req/s).
//!
//! Modes as in the simulated study: the foreground alone, both native (the device's one FIFO),
//! Triton-like request priorities (`hpf` at Level 1 with every command launched at
//! submission), xsched (`hpf` at the level asked, Level 3 by default: tile checkpoints), and a
//! Paella-like kernel-by-kernel dispatch (`hpf` at Level 1 with 2 kernels in
//! flight per client and a synchronization after each). The Paella-like mode goes through
//! xsched's launcher per queue: a central dispatcher's cost is not reproduced here (the
//! simulated study has it). Every mode replays the same seeded requests.

use crate::Report;
use crate::error::BenchError;
use crate::poisson::{ServiceLoad, serve};
use crate::stats::{pct_us, spread};
use hdrhistogram::Histogram;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::CpuDevice;
use xsched_core::{Hint, LaunchConfig, Level};
use xsched_report::plot::Figure;
use xsched_report::{cells, columns, round3};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError};
use xsched_workload::two_model::{self, MODES, Ratios, ShareMode};

/// What the study runs.
#[derive(Clone, Debug)]
pub struct TwoModelParams {
    /// Total request rates of both services (req/s), half each.
    pub rates: Vec<u32>,
    /// Kernels per request.
    pub kernels: u32,
    /// Shortest and longest kernel.
    pub kernel: (Duration, Duration),
    /// xsched's level.
    pub level: Level,
    /// Warm-up and measured time per run.
    pub warmup: Duration,
    /// Measured time per run.
    pub measure: Duration,
    /// Runs of every mode, interleaved (the report gives the median and the spread).
    pub runs: u32,
    /// Seed of the arrivals and kernel lengths.
    pub seed: u64,
}

impl Default for TwoModelParams {
    /// The simulated study ×10 in time, 4 rates, 5 s measured, 3 runs: about 6 minutes.
    fn default() -> Self {
        TwoModelParams {
            rates: vec![20, 50, 80, 100],
            kernels: 40,
            kernel: (Duration::from_micros(100), Duration::from_micros(300)),
            level: Level::Interrupt,
            warmup: Duration::from_millis(500),
            measure: Duration::from_secs(5),
            runs: 3,
            seed: 1,
        }
    }
}

/// Queue options for both services in `mode` (foreground first).
fn options(mode: ShareMode, level: Level) -> Result<(QueueOptions, QueueOptions), RuntimeError> {
    let scheduled = |o: QueueOptions| -> Result<_, RuntimeError> {
        Ok((
            o.with_hint(Hint::Priority(1))?,
            o.with_hint(Hint::Priority(0))?,
        ))
    };
    match mode {
        ShareMode::Standalone | ShareMode::Native => {
            Ok((QueueOptions::native(), QueueOptions::native()))
        }
        ShareMode::Triton => scheduled(
            QueueOptions::default()
                .with_level(Level::Block)
                .with_config(LaunchConfig::UNBOUNDED),
        ),
        ShareMode::XSched => scheduled(QueueOptions::default().with_level(level)),
        ShareMode::Paella => scheduled(
            QueueOptions::default()
                .with_level(Level::Block)
                .with_config(LaunchConfig::new(2, 1)?),
        ),
    }
}

/// Run one mode once at `rate`: the foreground's latencies.
pub fn run_mode(
    p: &TwoModelParams,
    rate: u32,
    mode: ShareMode,
) -> Result<Histogram<u64>, BenchError> {
    let device = CpuDevice::new(1)?;
    let runtime = Runtime::new(RuntimeConfig {
        policy: xsched_core::PolicySpec::registered("hpf"),
        ..RuntimeConfig::default()
    })?;
    let (fg_options, bg_options) = options(mode, p.level)?;
    let fg = runtime.create_queue(Arc::new(device.create_queue()), fg_options)?;
    let bg = match mode {
        ShareMode::Standalone => None,
        _ => Some(runtime.create_queue(Arc::new(device.create_queue()), bg_options)?),
    };
    let service = |seed| ServiceLoad {
        kernels: p.kernels,
        kernel: p.kernel,
        mean_gap: Duration::from_secs_f64(2.0 / f64::from(rate.max(1))),
        seed,
    };
    let start = Instant::now() + Duration::from_millis(20);
    let from = start + p.warmup;
    let end = from + p.measure;
    std::thread::scope(|s| {
        let bg_run = bg.as_ref().map(|q| {
            let svc = service(p.seed ^ 0xB6);
            s.spawn(move || serve(q, &svc, start, from, end))
        });
        let latency = serve(&fg, &service(p.seed), start, from, end);
        if let Some(Err(panic)) = bg_run.map(|h| h.join()) {
            std::panic::resume_unwind(panic);
        }
        Ok(latency)
    })
}

/// Every rate and mode `runs` times, interleaved; rows with the medians and spreads, and the
/// P99-ratio figure.
pub fn run(
    p: &TwoModelParams,
    progress: &dyn Fn(usize, usize),
) -> Result<(Report, Vec<Figure>), BenchError> {
    let runs = p.runs.max(1) as usize;
    let total = runs * p.rates.len() * MODES.len();
    // p99s[rate][mode][run], in ms.
    let mut p99s: Vec<Vec<Vec<f64>>> = p
        .rates
        .iter()
        .map(|_| MODES.iter().map(|_| Vec::new()).collect())
        .collect();
    let mut step = 0;
    for _ in 0..runs {
        for (r, &rate) in p.rates.iter().enumerate() {
            for (m, &mode) in MODES.iter().enumerate() {
                progress(step, total);
                step += 1;
                let latency = run_mode(p, rate, mode)?;
                p99s[r][m].push(pct_us(&latency, 0.99) / 1000.0);
            }
        }
    }
    progress(total, total);
    Ok(report(p, &p99s))
}

fn report(p: &TwoModelParams, p99s: &[Vec<Vec<f64>>]) -> (Report, Vec<Figure>) {
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    for (&rate, per_mode) in p.rates.iter().zip(p99s) {
        let alone = spread(per_mode[0].clone()).0;
        let mut medians = [0.0; 5];
        for (m, (mode, runs)) in MODES.iter().zip(per_mode).enumerate() {
            let (p99, lo, hi) = spread(runs.clone());
            medians[m] = p99 / alone;
            rows.push(cells(&[
                ("rate", json!(rate)),
                ("mode", json!(mode.name())),
                ("fg_p99_ms", json!(round3(p99))),
                ("min_ms", json!(round3(lo))),
                ("max_ms", json!(round3(hi))),
                ("fg_p99_ratio", json!(round3(medians[m]))),
            ]));
        }
        ratios.push(Ratios {
            rate: f64::from(rate),
            native: medians[1],
            triton: medians[2],
            xsched: medians[3],
            paella: medians[4],
        });
    }
    let figure = two_model::ratio_figure(
        "case-two-model-cpu-p99-ratio",
        "Two-model serving on the CPU device (time x 10): foreground P99 over standalone".into(),
        &ratios,
    );
    let report = Report {
        experiment: "case-two-model (cpu device, time x 10)".into(),
        columns: columns(&[
            "rate",
            "mode",
            "fg_p99_ms",
            "min_ms",
            "max_ms",
            "fg_p99_ratio",
        ]),
        rows,
        checks: two_model::checks(&ratios),
        events: None,
    };
    (report, vec![figure])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_of_every_mode_reports_its_rows() {
        let p = TwoModelParams {
            rates: vec![40],
            kernels: 10,
            warmup: Duration::from_millis(100),
            measure: Duration::from_millis(400),
            runs: 1,
            ..TwoModelParams::default()
        };
        let (r, figures) = run(&p, &|_, _| {}).expect("runs");
        assert_eq!(r.rows.len(), MODES.len());
        assert_eq!(figures[0].series.len(), MODES.len() - 1);
        for (row, mode) in r.rows.iter().zip(MODES) {
            assert_eq!(row["mode"], mode.name());
            let p99 = row["fg_p99_ms"].as_f64().unwrap_or(0.0);
            assert!(p99 >= 1.0, "a request is 10 kernels of 100-300 us: {row:?}");
        }
        assert_eq!(r.checks.len(), 2);
    }
}
