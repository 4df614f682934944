//! Preemption latency against command length (XSched Fig. 11): a saturating queue of commands
//! of length T is suspended at random moments; the latency is the time until the device runs
//! nothing of it. Rows for the count threshold alone and with xsched's in-flight time budget.

use super::build;
use super::{Check, Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{DeviceSpec, ProbeSpec, QueueMode, StageSpec};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::{LaunchConfig, Level, Nanos};
use xsched_report::{Verdict, columns_of, round3, row};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    levels: Option<Spanned<Vec<u8>>>,
    cmd_us: Option<Spanned<Vec<u64>>>,
    threshold: Option<Spanned<u32>>,
    batch: Option<Spanned<u32>>,
    budget_us: Option<Spanned<u64>>,
    probes: Option<Spanned<u64>>,
}

/// A checked preemption-latency experiment.
#[derive(Debug, Clone)]
pub struct Preempt {
    seed: u64,
    devices: Vec<Profile>,
    levels: Vec<Vec<Level>>,
    cmds: Vec<Nanos>,
    config: LaunchConfig,
    budget: Option<Nanos>,
    probes: u32,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    level: u8,
    threshold: u32,
    budget_us: Option<f64>,
    cmd_us: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Preempt {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<Preempt, ScenarioError> {
        let devices = build::devices(ctx, &f.devices)?;
        let levels = build::levels(ctx, &f.levels, &devices)?;
        let threshold = f.threshold.as_ref().map_or(8, |t| *t.get_ref());
        let batch = f.batch.as_ref().map_or(4, |b| *b.get_ref());
        let config = LaunchConfig::new(threshold, batch).map_err(|e| {
            let span = f
                .batch
                .as_ref()
                .map(Spanned::span)
                .or(f.threshold.as_ref().map(Spanned::span))
                .unwrap_or(0..0);
            ctx.err(span, format!("field `batch`: {e}"))
        })?;
        let cmds = match &f.cmd_us {
            Some(c) if c.get_ref().is_empty() || c.get_ref().contains(&0) => {
                return Err(ctx.err(
                    c.span(),
                    "field `cmd_us`: needs one or more positive lengths".into(),
                ));
            }
            Some(c) => c.get_ref().iter().map(|&us| Nanos::from_us(us)).collect(),
            None => [100, 200, 500, 1000, 2000].map(Nanos::from_us).to_vec(),
        };
        let budget = match &f.budget_us {
            Some(b) => Some(Nanos::from_us(build::positive(ctx, "budget_us", b)?)),
            None => Some(Nanos::from_ms(1)),
        };
        let probes = match &f.probes {
            Some(p) => build::positive(ctx, "probes", p)?.min(u64::from(u32::MAX)) as u32,
            None => 400,
        };
        Ok(Preempt {
            seed: ctx.header.seed,
            devices,
            levels,
            cmds,
            config,
            budget,
            probes,
        })
    }

    fn run_one(
        &self,
        p: &Profile,
        level: Level,
        cmd: Nanos,
        config: LaunchConfig,
    ) -> (f64, f64, u64) {
        let drain = Nanos(cmd.0 * u64::from(config.threshold()));
        let hold = cmd.max(Nanos::from_us(200));
        let gap_max = Nanos(drain.0 * 2);
        let per_probe = drain.0 + hold.0 + gap_max.0 + cmd.0 * 4;
        let duration = Nanos(per_probe.saturating_mul(u64::from(self.probes) * 3));
        let mut s = build::spec(
            self.seed,
            vec![DeviceSpec::from_profile(p)],
            duration,
            Nanos::ZERO,
        );
        let mut q = build::queue("bg", 0, QueueMode::XQueue { config, level }, 0);
        q.declared_estimates = true;
        s.queues.push(q);
        let stage = StageSpec {
            queue: 0,
            commands: 64,
            cmd_min: cmd,
            cmd_max: cmd,
        };
        s.workloads
            .push(build::workload("bg", stage, build::SATURATING));
        s.warmup = Nanos(drain.0 * 2);
        s.probe = Some(ProbeSpec {
            queue: 0,
            count: self.probes,
            hold,
            gap_max,
        });
        match simulate(s) {
            Ok(r) => {
                let h = r.preemption.unwrap_or_else(xsched_report::new_histogram);
                let q = |x| h.value_at_quantile(x) as f64 / 1e3;
                (q(0.5), q(0.99), r.events)
            }
            Err(_) => (f64::NAN, f64::NAN, 0),
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let mut jobs = Vec::new();
        for (p, levels) in self.devices.iter().zip(&self.levels) {
            for &l in levels {
                for &c in &self.cmds {
                    jobs.push((p, l, c, self.config));
                    if l == Level::Block && self.budget.is_some() {
                        jobs.push((p, l, c, self.config.with_inflight_budget(self.budget)));
                    }
                }
            }
        }
        let results = build::par_map(&jobs, tick, |(p, l, c, cfg)| self.run_one(p, *l, *c, *cfg));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut events = 0;
        for ((p, level, cmd, cfg), (p50, p99, ev)) in jobs.iter().zip(results) {
            events += ev;
            let t = cmd.as_us_f64();
            let budget = cfg.inflight_budget();
            let (target, pass) = match (level, budget) {
                (Level::Block, None) => {
                    let want = f64::from(cfg.threshold()) * t;
                    (
                        format!("~ threshold x T = {want:.0} us (+-25 %)"),
                        (p99 / want - 1.0).abs() <= 0.25,
                    )
                }
                (Level::Block, Some(b)) => {
                    let bound = b.as_us_f64().max(t) + t;
                    (
                        format!("<= max(budget, T) + T = {bound:.0} us"),
                        p99 <= bound * 1.05,
                    )
                }
                (Level::Deactivate, _) => {
                    let want = t + p.deactivate.value.as_us_f64();
                    (
                        format!("~ 1 x T + deactivate = {want:.0} us (+-25 %)"),
                        (p99 / want - 1.0).abs() <= 0.25,
                    )
                }
                (Level::Interrupt, _) => {
                    let want = p.interrupt.value.as_us_f64();
                    (
                        format!("~ interrupt cost {want:.0} us, flat in T"),
                        (p99 / want - 1.0).abs() <= 0.25,
                    )
                }
            };
            checks.push(Check {
                name: format!(
                    "{} {level} T={t:.0}us{}",
                    p.key,
                    if budget.is_some() { " budget" } else { "" }
                ),
                target,
                measured: format!("P99 {p99:.0} us"),
                verdict: Verdict::of(pass),
            });
            rows.push(row(Row {
                device: p.key,
                level: level.number(),
                threshold: cfg.threshold(),
                budget_us: budget.map(|b| round3(b.as_us_f64())),
                cmd_us: round3(t),
                p50_us: round3(p50),
                p99_us: round3(p99),
            }));
        }
        Report {
            experiment: "preempt-latency".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        }
    }
}
