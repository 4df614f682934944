//! Runtime overhead of progressive launching against the in-flight threshold (XSched §7.2):
//! one saturating process, through an XQueue under FCFS (nothing suspended) versus launching
//! natively. The loss comes from the hardware queue running dry while the launcher waits for
//! a synchronization point, and from the per-command interception cost.

use super::build;
use super::{Check, Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{DeviceSpec, QueueMode};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::PolicySpec;
use xsched_core::{LaunchConfig, Level, Nanos};
use xsched_report::{Verdict, columns_of, round3, row};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    thresholds: Option<Spanned<Vec<u32>>>,
    requests: Option<Spanned<u64>>,
}

/// A checked overhead experiment.
#[derive(Debug, Clone)]
pub struct Overhead {
    seed: u64,
    devices: Vec<Profile>,
    thresholds: Vec<u32>,
    requests: u64,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    threshold: u32,
    batch: u32,
    paper_config: bool,
    overhead_pct: f64,
}

const TUNED_MAX_PCT: f64 = 3.4;
const HIGH_THRESHOLD_MAX_PCT: f64 = 1.0;

impl Overhead {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<Overhead, ScenarioError> {
        let thresholds = match &f.thresholds {
            Some(t) if t.get_ref().is_empty() || t.get_ref().contains(&0) => {
                return Err(ctx.err(
                    t.span(),
                    "field `thresholds`: needs one or more positive thresholds".into(),
                ));
            }
            Some(t) => t.get_ref().clone(),
            None => vec![1, 2, 4, 8, 16, 32],
        };
        let requests = match &f.requests {
            Some(r) => build::positive(ctx, "requests", r)?,
            None => 100,
        };
        Ok(Overhead {
            seed: ctx.header.seed,
            devices: build::devices(ctx, &f.devices)?,
            thresholds,
            requests,
        })
    }

    fn run_one(&self, p: &Profile, config: Option<LaunchConfig>) -> (f64, u64) {
        let duration = Nanos(build::fg_standalone(p).0 * self.requests);
        let warmup = Nanos(duration.0 / 20);
        let mut s = build::spec(
            self.seed,
            vec![DeviceSpec::from_profile(p)],
            duration,
            warmup,
        );
        let (mode, policy) = match config {
            Some(config) => (
                QueueMode::XQueue {
                    config,
                    level: Level::Block,
                },
                Some(PolicySpec::registered("fcfs")),
            ),
            None => (QueueMode::Native, None),
        };
        s.policy = policy;
        s.queues.push(build::queue("app", 0, mode, 0));
        s.workloads.push(build::workload(
            "app",
            build::fg_stage(p, 0),
            build::SATURATING,
        ));
        match simulate(s) {
            Ok(r) => (
                r.queue_work[0].0 as f64 / r.window.0.max(1) as f64,
                r.events,
            ),
            Err(_) => (f64::NAN, 0),
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let mut jobs: Vec<(&Profile, Option<LaunchConfig>)> = Vec::new();
        for p in &self.devices {
            jobs.push((p, None));
            let mut configs: Vec<LaunchConfig> = self
                .thresholds
                .iter()
                .filter_map(|&t| LaunchConfig::new(t, (t / 2).max(1)).ok())
                .collect();
            if !configs.contains(&p.launch_config()) {
                configs.push(p.launch_config());
            }
            jobs.extend(configs.into_iter().map(|c| (p, Some(c))));
        }
        let results = build::par_map(&jobs, tick, |(p, c)| self.run_one(p, *c));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut events = 0;
        let mut native = f64::NAN;
        for ((p, config), (rate, ev)) in jobs.iter().zip(results) {
            events += ev;
            let Some(c) = config else {
                native = rate;
                continue;
            };
            let pct = (1.0 - rate / native) * 100.0;
            let paper = *c == p.launch_config();
            if paper {
                checks.push(Check {
                    name: format!(
                        "{} overhead at paper config {}/{}",
                        p.key,
                        c.threshold(),
                        c.batch()
                    ),
                    target: format!("< {TUNED_MAX_PCT} %"),
                    measured: format!("{pct:.2} %"),
                    verdict: Verdict::of(pct < TUNED_MAX_PCT),
                });
            }
            if c.threshold() > 10 {
                checks.push(Check {
                    name: format!("{} overhead at threshold {}", p.key, c.threshold()),
                    target: format!("< {HIGH_THRESHOLD_MAX_PCT} %"),
                    measured: format!("{pct:.2} %"),
                    verdict: Verdict::of(pct < HIGH_THRESHOLD_MAX_PCT),
                });
            }
            rows.push(row(Row {
                device: p.key,
                threshold: c.threshold(),
                batch: c.batch(),
                paper_config: paper,
                overhead_pct: round3(pct),
            }));
        }
        Report {
            experiment: "overhead".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        }
    }
}
