//! XSched's AI-PC case study on the built-in CPU device: the simulated study's workloads
//! (`scenarios/xsched-case-ai-pc.toml`) with real threads and spin kernels, on one worker, with
//! time scaled down tenfold so that a run takes seconds (every length and period divided by 10,
//! so the shares and ratios are those of the simulated study):
//!
//! - the *blur*, a camera-paced video pipeline: every 4 ms a frame of 4 kernels of 740 µs (74 %
//!   of the device), the next frame at the first tick after the last one completed (late
//!   frames are dropped, not queued);
//! - *speech recognition*: every 300 ms a job of 400 kernels of 200 µs (80 ms, 26.7 %),
//!   submitted together and due before the next one.
//!
//! Modes: the blur alone, FCFS (both queues native: the device's one FIFO), and xsched at
//! Level 2 with the blur above speech under fixed priority, and under laxity (speech critical
//! 285 ms after its job became ready). Measured: the blur's P99 frame interval (completion to
//! completion), speech jobs, those done within their period, and the lost ones (late).

use crate::Report;
use crate::error::BenchError;
use crate::stats::{pct_us, spread};
use hdrhistogram::Histogram;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Hint, Level};
use xsched_report::plot::{Figure, samples};
use xsched_report::{cells, columns, round3};
use xsched_runtime::{CommandHandle, QueueOptions, Runtime, RuntimeConfig, XQueue};
use xsched_workload::ai_pc::{self, MODES, ModeResult, ShareMode};

/// What the study runs.
#[derive(Clone, Debug)]
pub struct AiPcParams {
    /// Camera period of the blur.
    pub frame_period: Duration,
    /// Kernels per frame.
    pub frame_kernels: u32,
    /// Length of each frame kernel.
    pub frame_kernel: Duration,
    /// Period (and deadline) of the speech jobs.
    pub speech_period: Duration,
    /// Kernels per speech job.
    pub speech_kernels: u32,
    /// Length of each speech kernel.
    pub speech_kernel: Duration,
    /// Speech's laxity under the laxity policy.
    pub laxity: Duration,
    /// Measured time per mode (after two speech periods of warm-up).
    pub measure: Duration,
    /// Runs of every mode, interleaved (the report gives the median and the spread).
    pub runs: u32,
}

impl Default for AiPcParams {
    /// The simulated study's defaults divided by 10, 10 s measured per mode, 3 runs: about
    /// 2.5 minutes.
    fn default() -> Self {
        AiPcParams {
            frame_period: Duration::from_millis(4),
            frame_kernels: 4,
            frame_kernel: Duration::from_micros(740),
            speech_period: Duration::from_millis(300),
            speech_kernels: 400,
            speech_kernel: Duration::from_micros(200),
            laxity: Duration::from_millis(285),
            measure: Duration::from_secs(10),
            runs: 3,
        }
    }
}

/// What one run of one mode measured.
#[derive(Debug)]
pub struct RunResult {
    /// The blur's frame intervals (ns).
    pub intervals: Histogram<u64>,
    /// Speech jobs that arrived in the measured window.
    pub speech_jobs: u32,
    /// Of those, the ones done within their period.
    pub speech_on_time: u32,
}

/// Run one mode once.
pub fn run_mode(p: &AiPcParams, mode: ShareMode) -> Result<RunResult, BenchError> {
    let device = CpuDevice::new(1)?;
    let policy = if mode == ShareMode::Laxity {
        "laxity"
    } else {
        "hpf"
    };
    let runtime = Runtime::new(RuntimeConfig {
        policy: xsched_core::PolicySpec::registered(policy),
        ..RuntimeConfig::default()
    })?;
    let (blur_options, speech_options) = match mode {
        ShareMode::Standalone | ShareMode::Fcfs => (QueueOptions::native(), QueueOptions::native()),
        ShareMode::Priority | ShareMode::Laxity => {
            let o = QueueOptions::default().with_level(Level::Deactivate);
            let speech = o.with_hint(Hint::Priority(0))?;
            let speech = if mode == ShareMode::Laxity {
                speech.with_hint(Hint::Laxity(xsched_core::Nanos(
                    u64::try_from(p.laxity.as_nanos()).unwrap_or(u64::MAX),
                )))?
            } else {
                speech
            };
            (o.with_hint(Hint::Priority(1))?, speech)
        }
    };
    let blur = runtime.create_queue(Arc::new(device.create_queue()), blur_options)?;
    let speech = match mode {
        ShareMode::Standalone => None,
        _ => Some(runtime.create_queue(Arc::new(device.create_queue()), speech_options)?),
    };
    let start = Instant::now() + Duration::from_millis(20);
    let measured_from = start + 2 * p.speech_period;
    let end = measured_from + p.measure;
    std::thread::scope(|s| {
        let speech_run = speech
            .as_ref()
            .map(|q| s.spawn(move || speech_jobs(q, p, start, measured_from, end)));
        let intervals = blur_frames(&blur, p, start, measured_from, end);
        let (speech_jobs, speech_on_time) = match speech_run.map(|h| h.join()) {
            Some(Ok(counts)) => counts,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => (0, 0),
        };
        Ok(RunResult {
            intervals,
            speech_jobs,
            speech_on_time,
        })
    })
}

/// The camera-paced blur until `end`: the intervals between frames completed after `from`.
fn blur_frames(
    q: &XQueue<CpuQueue>,
    p: &AiPcParams,
    start: Instant,
    from: Instant,
    end: Instant,
) -> Histogram<u64> {
    let kernel = Arc::new(Spin::new(p.frame_kernel));
    let mut intervals = xsched_report::new_histogram();
    let (mut tick, mut last_done) = (start, None::<Instant>);
    while tick < end {
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        let mut last = None;
        for _ in 0..p.frame_kernels {
            last = q.submit(CpuCommand::Kernel(kernel.clone())).ok();
        }
        // A queue that refuses commands ends the stream (no frame intervals are made up).
        let Some(h) = last else { break };
        let _ = h.wait();
        let done = Instant::now();
        if let Some(prev) = last_done.filter(|_| done >= from) {
            xsched_report::record_duration(&mut intervals, done - prev);
        }
        last_done = Some(done);
        // The first tick not before now: the ones a late frame overran are dropped.
        let behind = done.saturating_duration_since(tick).as_nanos();
        let period = p.frame_period.as_nanos().max(1);
        let skip = u32::try_from(behind.div_ceil(period).max(1)).unwrap_or(u32::MAX);
        tick += p.frame_period * skip;
    }
    intervals
}

/// A speech job every period until `end`; (jobs arrived after `from`, those on time).
fn speech_jobs(
    q: &XQueue<CpuQueue>,
    p: &AiPcParams,
    start: Instant,
    from: Instant,
    end: Instant,
) -> (u32, u32) {
    let kernel = Arc::new(Spin::new(p.speech_kernel));
    let (tx, rx) = crossbeam_channel::unbounded::<(Instant, CommandHandle)>();
    std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            let (mut jobs, mut on_time) = (0u32, 0u32);
            for (arrival, handle) in rx {
                let _ = handle.wait();
                if arrival >= from {
                    jobs += 1;
                    on_time += u32::from(arrival.elapsed() <= p.speech_period);
                }
            }
            (jobs, on_time)
        });
        let mut arrival = start;
        while arrival + p.speech_period <= end {
            std::thread::sleep(arrival.saturating_duration_since(Instant::now()));
            let mut last = None;
            for _ in 0..p.speech_kernels {
                last = q.submit(CpuCommand::Kernel(kernel.clone())).ok();
            }
            if let Some(h) = last {
                let _ = tx.send((arrival, h));
            }
            arrival += p.speech_period;
        }
        drop(tx);
        match waiter.join() {
            Ok(counts) => counts,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Every mode `runs` times, interleaved; rows per mode with the median and the spread, and the
/// CDF of the blur's frame interval per mode over all runs.
pub fn run(
    p: &AiPcParams,
    progress: &dyn Fn(usize, usize),
) -> Result<(Report, Vec<Figure>), BenchError> {
    let runs = p.runs.max(1) as usize;
    let mut results: Vec<Vec<RunResult>> = MODES.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        for (i, &mode) in MODES.iter().enumerate() {
            progress(run * MODES.len() + i, runs * MODES.len());
            results[i].push(run_mode(p, mode)?);
        }
    }
    progress(runs * MODES.len(), runs * MODES.len());
    Ok((report(&results), vec![interval_cdf(&results)]))
}

/// The blur's frame intervals (ms) of every run of each mode, as one CDF per mode.
fn interval_cdf(results: &[Vec<RunResult>]) -> Figure {
    ai_pc::interval_cdf(
        "case-ai-pc-cpu-frame-interval-cdf",
        "AI PC on the CPU device (time / 10): blur frame interval".into(),
        results
            .iter()
            .map(|rs| rs.iter().flat_map(|r| samples(&r.intervals, 1e6)).collect())
            .collect(),
    )
}

fn report(results: &[Vec<RunResult>]) -> Report {
    let p99_ms = |r: &RunResult| pct_us(&r.intervals, 0.99) / 1000.0;
    let standalone = spread(results[0].iter().map(p99_ms).collect()).0;
    let mut rows = Vec::new();
    let mut outcomes = Vec::new();
    for (mode, rs) in MODES.iter().zip(results) {
        let (p99, lo, hi) = spread(rs.iter().map(p99_ms).collect());
        let jobs: u32 = rs.iter().map(|r| r.speech_jobs).sum();
        let on_time: u32 = rs.iter().map(|r| r.speech_on_time).sum();
        outcomes.push(ModeResult {
            p99_ms: p99,
            jobs: u64::from(jobs),
            on_time: u64::from(on_time),
        });
        rows.push(cells(&[
            ("policy", json!(mode.name())),
            ("blur_p99_interval_ms", json!(round3(p99))),
            ("min_ms", json!(round3(lo))),
            ("max_ms", json!(round3(hi))),
            ("blur_p99_ratio", json!(round3(p99 / standalone))),
            ("speech_jobs", json!(jobs)),
            ("speech_on_time", json!(on_time)),
            ("lost_transcripts", json!(jobs - on_time)),
        ]));
    }
    let checks = ai_pc::checks(&[0, 1, 2, 3].map(|i| outcomes[i]));
    Report {
        experiment: "case-ai-pc (cpu device, time / 10)".into(),
        columns: columns(&[
            "policy",
            "blur_p99_interval_ms",
            "min_ms",
            "max_ms",
            "blur_p99_ratio",
            "speech_jobs",
            "speech_on_time",
            "lost_transcripts",
        ]),
        rows,
        checks,
        events: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_of_every_mode_reports_its_rows() {
        let p = AiPcParams {
            measure: Duration::from_millis(300),
            speech_period: Duration::from_millis(100),
            speech_kernels: 20,
            laxity: Duration::from_millis(80),
            runs: 1,
            ..AiPcParams::default()
        };
        let (r, figures) = run(&p, &|_, _| {}).expect("runs");
        assert_eq!(r.rows.len(), MODES.len());
        assert_eq!(figures[0].series.len(), MODES.len(), "one CDF per mode");
        for (row, mode) in r.rows.iter().zip(MODES) {
            assert_eq!(row["policy"], mode.name());
            let p99 = row["blur_p99_interval_ms"].as_f64().unwrap_or(0.0);
            assert!(
                p99 >= 3.0,
                "a frame interval is at least the 4 ms tick, less noise: {row:?}"
            );
            let jobs = row["speech_jobs"].as_u64().unwrap_or(0);
            if mode == ShareMode::Standalone {
                assert_eq!(jobs, 0);
            } else {
                assert!(jobs >= 2, "{row:?}");
            }
        }
        assert_eq!(r.checks.len(), 4, "the simulated study's checks");
    }
}
