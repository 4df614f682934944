//! XSched's AI-PC case study (PAPERS.md §1, "Case studies"): one NPU shared by a video call's
//! background blur (a frame every 40 ms that must not stall) and speech recognition (a job
//! every 3 s that must finish before the next one starts). FCFS lets a speech job's commands
//! sit in front of the frames; fixed priority for the video keeps the frames steady but gives
//! speech only the frames' idle time; laxity lets speech run at low priority until only just
//! enough of its period is left, then above the video. The workload's numbers and their sources
//! are in the scenario file (`scenarios/xsched-case-ai-pc.toml`).
//!
//! Rows: policy, level, the blur's P99 frame interval (time between consecutive displayed
//! frames) and its ratio to standalone, speech jobs, those finished within their period, and
//! lost transcripts (jobs that missed it, finished late or never), and speech's share of the
//! device. Defaults are the scenario file's values.

use super::build::{self, Commands, HOUR_MS, MAX_COMMANDS, bounded, commands};
use super::{Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{Arrival, DeviceSpec, QueueMode, WorkloadSpec};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::PolicySpec;
use xsched_core::{Hint, Level, Nanos};
use xsched_report::plot::{Figure, samples};
use xsched_report::{columns_of, round3, row};
use xsched_workload::ai_pc::{self, MODES, ModeResult, ShareMode};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    device: Option<Spanned<String>>,
    level: Option<Spanned<u8>>,
    seconds: Option<Spanned<u64>>,
    frame_fps: Option<Spanned<u64>>,
    frame_commands: Option<Spanned<u64>>,
    frame_cmd_us: Option<Spanned<[u64; 2]>>,
    speech_period_ms: Option<Spanned<u64>>,
    speech_commands: Option<Spanned<u64>>,
    speech_cmd_us: Option<Spanned<[u64; 2]>>,
    laxity_ms: Option<Spanned<u64>>,
}

/// A checked AI-PC study.
#[derive(Debug, Clone)]
pub struct AiPc {
    seed: u64,
    device: Profile,
    level: Level,
    seconds: u64,
    frame_fps: u64,
    frame: Commands,
    speech_period: Nanos,
    speech: Commands,
    laxity: Nanos,
}

#[derive(Serialize)]
struct Row {
    policy: &'static str,
    level: Option<u8>,
    blur_p99_interval_ms: f64,
    blur_p99_ratio: f64,
    speech_jobs: u64,
    speech_on_time: u64,
    lost_transcripts: u64,
    speech_device_share: f64,
}

/// What one run measured.
struct Measured {
    /// Every frame interval (ms), for the CDF.
    intervals_ms: Vec<f64>,
    blur_p99_interval_us: f64,
    speech_jobs: u64,
    speech_on_time: u64,
    speech_share: f64,
    events: u64,
}

impl AiPc {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<AiPc, ScenarioError> {
        let device = build::device_or(ctx, "device", &f.device, "npu3720")?;
        let level = build::level_on(ctx, &f.level, &device)?;
        let frame_n = bounded(ctx, "frame_commands", &f.frame_commands, 4, MAX_COMMANDS)?;
        let speech_n = bounded(
            ctx,
            "speech_commands",
            &f.speech_commands,
            800,
            MAX_COMMANDS,
        )?;
        let speech_period = Nanos::from_ms(bounded(
            ctx,
            "speech_period_ms",
            &f.speech_period_ms,
            3000,
            HOUR_MS,
        )?);
        let laxity = Nanos::from_ms(bounded(ctx, "laxity_ms", &f.laxity_ms, 2850, HOUR_MS)?);
        if laxity >= speech_period {
            let span = f.laxity_ms.as_ref().map(Spanned::span).unwrap_or_default();
            return Err(ctx.err(
                span,
                "field `laxity_ms`: must be shorter than `speech_period_ms`".into(),
            ));
        }
        Ok(AiPc {
            seed: ctx.header.seed,
            level,
            seconds: bounded(ctx, "seconds", &f.seconds, 60, 86_400)?,
            frame_fps: bounded(ctx, "frame_fps", &f.frame_fps, 25, 10_000)?,
            frame: commands(ctx, "frame_cmd_us", frame_n, &f.frame_cmd_us, [7300, 7500])?,
            speech_period,
            speech: commands(
                ctx,
                "speech_cmd_us",
                speech_n,
                &f.speech_cmd_us,
                [900, 1100],
            )?,
            laxity,
            device,
        })
    }

    fn run_one(&self, mode: ShareMode) -> Measured {
        // Two speech periods of warm-up, so every measured job starts in steady state.
        let warmup = Nanos(2 * self.speech_period.0);
        let duration = warmup + Nanos::from_ms(1000 * self.seconds);
        let p = &self.device;
        let mut s = build::spec(
            self.seed,
            vec![DeviceSpec::from_profile(p)],
            duration,
            warmup,
        );
        let qmode = match mode {
            ShareMode::Priority | ShareMode::Laxity => build::xqueue(p, self.level),
            ShareMode::Standalone | ShareMode::Fcfs => QueueMode::Native,
        };
        s.queues.push(build::queue("blur", 0, qmode, 1));
        s.workloads.push(build::workload(
            "blur",
            self.frame.on(0),
            // Late frames are dropped, not queued: the pipeline blurs the newest camera frame.
            Arrival::Paced {
                rate_per_s: self.frame_fps as f64,
            },
        ));
        if mode != ShareMode::Standalone {
            let mut q = build::queue("speech", 0, qmode, 0);
            if mode == ShareMode::Laxity {
                // A positive laxity is always a valid hint.
                let _ = q.hints.apply(Hint::Laxity(self.laxity));
            }
            s.queues.push(q);
            s.workloads.push(WorkloadSpec {
                deadline: Some(self.speech_period),
                ..build::workload(
                    "speech",
                    self.speech.on(1),
                    Arrival::Uniform {
                        rate_per_s: 1e9 / self.speech_period.0 as f64,
                    },
                )
            });
        }
        s.policy = match mode {
            ShareMode::Priority => Some(PolicySpec::registered("hpf")),
            ShareMode::Laxity => Some(PolicySpec::registered("laxity")),
            ShareMode::Standalone | ShareMode::Fcfs => None,
        };
        match simulate(s) {
            Ok(r) => {
                let speech = r.workloads.get(1);
                let blur = &r.workloads[0];
                Measured {
                    intervals_ms: samples(&blur.interval, 1e6),
                    blur_p99_interval_us: blur.interval_quantile_us(0.99),
                    // Jobs still running at the end count only once they are past due.
                    speech_jobs: speech.map_or(0, |m| m.completed + m.unfinished_late),
                    speech_on_time: speech.map_or(0, |m| m.on_time),
                    speech_share: r
                        .queue_work
                        .get(1)
                        .map_or(0.0, |w| w.0 as f64 / r.window.0.max(1) as f64),
                    events: r.events,
                }
            }
            Err(_) => Measured {
                intervals_ms: Vec::new(),
                blur_p99_interval_us: f64::NAN,
                speech_jobs: 0,
                speech_on_time: 0,
                speech_share: f64::NAN,
                events: 0,
            },
        }
    }

    /// The report, and the CDF of the blur's frame interval per policy.
    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> (Report, Vec<Figure>) {
        let results = build::par_map(&MODES, tick, |m| self.run_one(*m));
        let standalone = results[0].blur_p99_interval_us;
        let mut rows = Vec::new();
        let mut events = 0;
        for (mode, r) in MODES.iter().zip(&results) {
            events += r.events;
            rows.push(row(Row {
                policy: mode.name(),
                level: mode.scheduled().then_some(self.level.number()),
                blur_p99_interval_ms: round3(r.blur_p99_interval_us / 1000.0),
                blur_p99_ratio: round3(r.blur_p99_interval_us / standalone),
                speech_jobs: r.speech_jobs,
                speech_on_time: r.speech_on_time,
                lost_transcripts: r.speech_jobs - r.speech_on_time,
                speech_device_share: round3(r.speech_share),
            }));
        }
        let outcome = |r: &Measured| ModeResult {
            p99_ms: r.blur_p99_interval_us / 1000.0,
            jobs: r.speech_jobs,
            on_time: r.speech_on_time,
        };
        let checks = ai_pc::checks(&[0, 1, 2, 3].map(|i| outcome(&results[i])));
        let cdf = ai_pc::interval_cdf(
            "case-ai-pc-frame-interval-cdf",
            format!("AI PC on {}: blur frame interval", self.device.name),
            results.into_iter().map(|r| r.intervals_ms).collect(),
        );
        let report = Report {
            experiment: "case-ai-pc".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        };
        (report, vec![cdf])
    }
}
