//! XSched's GPU-harvesting case study (PAPERS.md §1, "Case studies"): a production inference
//! service shares a GPU with an opportunistic job (a training loop, or a financial-computing
//! stream of long kernels) that should use the time the service leaves idle without slowing
//! it. Native sharing lets the job take the device's own share; container-level sharing holds
//! back the job's launches, by a fixed quota (vCUDA-like) or a rate that follows the service's
//! pace (TGS-like), and cannot stop a kernel already launched; xsched suspends the job at the
//! device's highest preemption level whenever the service has work (fixed priority), or gives
//! it only the service's predicted idle windows (SLO-aware). The workload's numbers and their
//! sources are in the scenario file (`scenarios/xsched-case-harvest.toml`).
//!
//! Rows: device, job, mode, level, the job's harvested share of the device and of the time the
//! service leaves idle, the service's mean and P99 latency and its slowdown (mean latency over
//! standalone). Defaults are the scenario file's values.

use super::build::{self, Commands, HOUR_MS, MAX_COMMANDS, bounded, commands};
use super::{Ctx, Report, ScenarioError};
use crate::engine::{SimResult, simulate};
use crate::profile::Profile;
use crate::spec::{Arrival, DeviceSpec, QueueMode, SimSpec, WorkloadSpec};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::{Hint, Level, Nanos};
use xsched_report::plot::Figure;
use xsched_report::{columns_of, round3, row};
use xsched_workload::harvest_case::{self, LpJob, MODES, ModeResult, ShareMode};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    level: Option<Spanned<u8>>,
    jobs: Option<Spanned<Vec<String>>>,
    seconds: Option<Spanned<u64>>,
    production_load: Option<Spanned<f64>>,
    slo_factor: Option<Spanned<f64>>,
    quota_share: Option<Spanned<f64>>,
    training_commands: Option<Spanned<u64>>,
    training_cmd_us: Option<Spanned<[u64; 2]>>,
    training_cpu_us: Option<Spanned<u64>>,
    financial_commands: Option<Spanned<u64>>,
    financial_cmd_us: Option<Spanned<[u64; 2]>>,
    slowdown_slack: Option<Spanned<f64>>,
    inflight_budget_us: Option<Spanned<u64>>,
}

/// A checked harvesting study.
#[derive(Debug, Clone)]
pub struct Harvest {
    seed: u64,
    devices: Vec<(Profile, Level)>,
    jobs: Vec<LpJob>,
    seconds: u64,
    production_load: f64,
    slo_factor: f64,
    quota_share: f64,
    training: Commands,
    training_cpu: Nanos,
    financial: Commands,
    slowdown_slack: f64,
    inflight_budget: Nanos,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    job: &'static str,
    mode: &'static str,
    level: Option<u8>,
    harvested_share: f64,
    harvested_of_idle: f64,
    prod_mean_ms: f64,
    prod_p99_ms: f64,
    prod_slowdown_pct: f64,
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    harvested: f64,
    prod_share: f64,
    mean_us: f64,
    p99_us: f64,
    events: u64,
}

/// Warm-up before measuring: the TGS-like controller's probe and climb need a few seconds.
const WARMUP: Nanos = Nanos::from_ms(3000);

/// The profiles named by `devices` (default: gv100 and mi50), each with its preemption level.
fn leveled_devices(ctx: &Ctx, f: &File) -> Result<Vec<(Profile, Level)>, ScenarioError> {
    let profiles = match &f.devices {
        Some(_) => build::devices(ctx, &f.devices)?,
        None => ["gv100", "mi50"]
            .into_iter()
            .filter_map(crate::profile::by_key)
            .collect(),
    };
    let mut devices = Vec::new();
    for p in profiles {
        let level = build::level_on(ctx, &f.level, &p)?;
        devices.push((p, level));
    }
    Ok(devices)
}

/// The jobs named by `jobs` (default: both).
fn job_list(ctx: &Ctx, v: &Option<Spanned<Vec<String>>>) -> Result<Vec<LpJob>, ScenarioError> {
    let jobs = match v {
        None => vec![LpJob::Training, LpJob::Financial],
        Some(js) if js.get_ref().is_empty() => {
            return Err(ctx.err(js.span(), "field `jobs`: names no job".into()));
        }
        Some(js) => js
            .get_ref()
            .iter()
            .map(|j| {
                LpJob::by_name(j).ok_or_else(|| {
                    ctx.err(
                        js.span(),
                        format!("field `jobs`: unknown job `{j}`; known: training, financial"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(jobs)
}

/// What a run's `outcome` measured (NaNs where it could not run).
fn measure(outcome: Result<SimResult, ScenarioError>) -> Measured {
    match outcome {
        Ok(r) => {
            let share = |i: usize| {
                r.queue_work
                    .get(i)
                    .map_or(0.0, |w| w.0 as f64 / r.window.0.max(1) as f64)
            };
            let prod = &r.workloads[0];
            Measured {
                harvested: share(1),
                prod_share: share(0),
                mean_us: prod.mean_us(),
                p99_us: prod.quantile_us(0.99),
                events: r.events,
            }
        }
        Err(_) => Measured {
            harvested: f64::NAN,
            prod_share: f64::NAN,
            mean_us: f64::NAN,
            p99_us: f64::NAN,
            events: 0,
        },
    }
}

/// Every mode's outcome for `job` on `p` at `level`, from `measured` (standalone first, in
/// `MODES` order), pushing one row per mode onto `rows`.
fn mode_rows(
    p: &Profile,
    level: Level,
    job: LpJob,
    measured: &[Measured],
    rows: &mut Vec<serde_json::Map<String, serde_json::Value>>,
) -> [ModeResult; 6] {
    let base = measured[0];
    let idle = (1.0 - base.prod_share).max(1e-9);
    let mut outcomes = [ModeResult {
        harvested: 0.0,
        slowdown: 0.0,
    }; 6];
    for (i, (mode, m)) in MODES.iter().zip(measured).enumerate() {
        let harvested = if *mode == ShareMode::Standalone {
            0.0
        } else {
            m.harvested
        };
        outcomes[i] = ModeResult {
            harvested,
            slowdown: m.mean_us / base.mean_us - 1.0,
        };
        rows.push(row(Row {
            device: p.key,
            job: job.name(),
            mode: mode.name(),
            level: match mode {
                ShareMode::Standalone | ShareMode::Native => None,
                ShareMode::Quota | ShareMode::Tgs => Some(Level::Block.number()),
                ShareMode::Priority | ShareMode::SloAware => Some(level.number()),
            },
            harvested_share: round3(harvested),
            harvested_of_idle: round3(harvested / idle),
            prod_mean_ms: round3(m.mean_us / 1000.0),
            prod_p99_ms: round3(m.p99_us / 1000.0),
            prod_slowdown_pct: round3(100.0 * outcomes[i].slowdown),
        }));
    }
    outcomes
}

impl Harvest {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<Harvest, ScenarioError> {
        let devices = leveled_devices(ctx, &f)?;
        let jobs = job_list(ctx, &f.jobs)?;
        let production_load =
            build::fraction(ctx, "production_load", &f.production_load, 0.75, 0.95)?;
        let n = |field, v: &Option<Spanned<u64>>, default| {
            bounded(ctx, field, v, default, MAX_COMMANDS)
        };
        let training_n = n("training_commands", &f.training_commands, 100)?;
        let financial_n = n("financial_commands", &f.financial_commands, 4)?;
        Ok(Harvest {
            seed: ctx.header.seed,
            devices,
            jobs,
            seconds: bounded(ctx, "seconds", &f.seconds, 30, 86_400)?,
            production_load,
            slo_factor: build::fraction(ctx, "slo_factor", &f.slo_factor, 1.5, 100.0)?,
            quota_share: build::fraction(
                ctx,
                "quota_share",
                &f.quota_share,
                1.0 - production_load,
                1.0,
            )?,
            training: commands(
                ctx,
                "training_cmd_us",
                training_n,
                &f.training_cmd_us,
                [100, 900],
            )?,
            training_cpu: Nanos::from_us(bounded(
                ctx,
                "training_cpu_us",
                &f.training_cpu_us,
                2000,
                HOUR_MS * 1000,
            )?),
            financial: commands(
                ctx,
                "financial_cmd_us",
                financial_n,
                &f.financial_cmd_us,
                [5000, 15000],
            )?,
            inflight_budget: Nanos::from_us(bounded(
                ctx,
                "inflight_budget_us",
                &f.inflight_budget_us,
                1000,
                HOUR_MS * 1000,
            )?),
            slowdown_slack: build::fraction(ctx, "slowdown_slack", &f.slowdown_slack, 0.02, 1.0)?,
        })
    }

    /// The service's request rate on `p`: the load over one request's standalone time.
    fn production_rate(&self, p: &Profile) -> f64 {
        self.production_load * 1e9 / build::fg_standalone(p).0.max(1) as f64
    }

    fn run_one(
        &self,
        p: &Profile,
        level: Level,
        job: LpJob,
        mode: ShareMode,
        slo: Nanos,
    ) -> Measured {
        let duration = WARMUP + Nanos::from_ms(1000 * self.seconds);
        let mut s = build::spec(
            self.seed,
            vec![DeviceSpec::from_profile(p)],
            duration,
            WARMUP,
        );
        // Every mode sees the same production requests.
        s.own_streams = true;
        // The baselines hold back launches (Level 1); xsched preempts at the study's level.
        let qmode = match mode {
            ShareMode::Standalone | ShareMode::Native => QueueMode::Native,
            ShareMode::Quota | ShareMode::Tgs => build::xqueue(p, Level::Block),
            ShareMode::Priority | ShareMode::SloAware => build::xqueue(p, level),
        };
        let mut prod = build::queue("production", 0, qmode, 1);
        if mode == ShareMode::SloAware {
            // A positive SLO is always a valid hint.
            let _ = prod.hints.apply(Hint::Slo(slo));
        }
        s.queues.push(prod);
        s.workloads.push(build::workload(
            "production",
            build::fg_stage(p, 0),
            Arrival::Poisson {
                rate_per_s: self.production_rate(p),
            },
        ));
        if mode != ShareMode::Standalone {
            self.add_job(&mut s, qmode, job);
        }
        let outcome = mode
            .policy(self.quota_share)
            .map_err(|source| ScenarioError::Core {
                queue: "*".into(),
                source,
            })
            .and_then(|policy| {
                s.policy = policy;
                simulate(s)
            });
        measure(outcome)
    }

    /// Add the opportunistic `job`'s queue (beside a service queue of `qmode`) and workload to `s`.
    fn add_job(&self, s: &mut SimSpec, qmode: QueueMode, job: LpJob) {
        // Where launches are held back, the job keeps at most the budget's worth of work
        // in flight (at least one command).
        let job_mode = match qmode {
            QueueMode::XQueue { config, level } => QueueMode::XQueue {
                config: config.with_inflight_budget(Some(self.inflight_budget)),
                level,
            },
            QueueMode::Native => QueueMode::Native,
        };
        s.queues.push(build::queue("opportunistic", 0, job_mode, 0));
        let (stage, think) = match job {
            LpJob::Training => (self.training, self.training_cpu),
            LpJob::Financial => (self.financial, Nanos::ZERO),
        };
        s.workloads.push(WorkloadSpec {
            idempotent: true,
            ..build::workload("opportunistic", stage.on(1), Arrival::Closed { think })
        });
    }

    /// The report, and the trade-off figure (harvested share against slowdown).
    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> (Report, Vec<Figure>) {
        let pairs: Vec<(usize, LpJob)> = (0..self.devices.len())
            .flat_map(|d| self.jobs.iter().map(move |j| (d, *j)))
            .collect();
        // Standalone first, per device: the SLO-aware rows need the service's P99 alone.
        let alone = build::par_map(&self.devices, &|_, _| {}, |(p, level)| {
            self.run_one(
                p,
                *level,
                LpJob::Training,
                ShareMode::Standalone,
                Nanos::ZERO,
            )
        });
        let runs: Vec<(usize, LpJob, ShareMode)> = pairs
            .iter()
            .flat_map(|&(d, j)| MODES.iter().skip(1).map(move |m| (d, j, *m)))
            .collect();
        let results = build::par_map(&runs, tick, |&(d, job, mode)| {
            let (p, level) = &self.devices[d];
            let slo = Nanos((alone[d].p99_us * 1e3 * self.slo_factor) as u64);
            self.run_one(p, *level, job, mode, slo)
        });
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut points: Vec<Vec<ModeResult>> = MODES.iter().map(|_| Vec::new()).collect();
        let mut events: u64 = alone.iter().map(|m| m.events).sum();
        for (k, &(d, job)) in pairs.iter().enumerate() {
            let (p, level) = &self.devices[d];
            let base = alone[d];
            let per_mode = MODES.len() - 1;
            let measured: Vec<Measured> = std::iter::once(base)
                .chain(results[k * per_mode..(k + 1) * per_mode].iter().copied())
                .collect();
            let outcomes = mode_rows(p, *level, job, &measured, &mut rows);
            for (i, m) in measured.iter().enumerate() {
                events += if i == 0 { 0 } else { m.events };
                if i > 0 {
                    points[i].push(outcomes[i]);
                }
            }
            checks.extend(harvest_case::checks(
                &format!("{} {}", p.key, job.name()),
                &outcomes,
                self.slowdown_slack,
            ));
        }
        let figure = harvest_case::tradeoff_figure(
            "case-harvest-tradeoff",
            "GPU harvesting (simulated): harvested share against production slowdown".into(),
            &points,
        );
        let report = Report {
            experiment: "case-harvest".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        };
        (report, vec![figure])
    }
}
