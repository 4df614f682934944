//! Foreground beside a saturating background (XSched Fig. 9): the foreground's open-loop P99
//! standalone, natively beside the background, and under xsched fixed priority at each level.

use super::build;
use super::{Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{Arrival, QueueMode};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::PolicySpec;
use xsched_core::{Level, Nanos};
use xsched_report::{columns_of, round3, row};
use xsched_workload::fg_bg::{self, ShareMode, XSCHED_MAX};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    levels: Option<Spanned<Vec<u8>>>,
    requests: Option<Spanned<u64>>,
    budget_us: Option<Spanned<u64>>,
    arrival: Option<Spanned<String>>,
}

/// A checked fg-bg experiment.
#[derive(Debug, Clone)]
pub struct FgBg {
    seed: u64,
    devices: Vec<Profile>,
    levels: Vec<Vec<Level>>,
    requests: u64,
    budget: Option<Nanos>,
    poisson: bool,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    mode: &'static str,
    level: Option<u8>,
    budget_us: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    p99_ratio: f64,
    bg_device_share: f64,
}

impl FgBg {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<FgBg, ScenarioError> {
        let devices = build::devices(ctx, &f.devices)?;
        let levels = build::levels(ctx, &f.levels, &devices)?;
        let requests = match &f.requests {
            Some(r) => build::positive(ctx, "requests", r)?,
            None => 600,
        };
        let budget = match &f.budget_us {
            Some(b) => Some(Nanos::from_us(build::positive(ctx, "budget_us", b)?)),
            None => None,
        };
        let poisson = match &f.arrival {
            None => false,
            Some(a) => match a.get_ref().as_str() {
                "uniform" => false,
                "poisson" => true,
                other => {
                    return Err(ctx.err(
                        a.span(),
                        format!("field `arrival`: unknown `{other}`; known: uniform, poisson"),
                    ));
                }
            },
        };
        Ok(FgBg {
            seed: ctx.header.seed,
            devices,
            levels,
            requests,
            budget,
            poisson,
        })
    }

    /// One run; `budget` bounds what suspending the background must drain under xsched.
    fn run_one(&self, p: &Profile, mode: ShareMode, budget: Option<Nanos>) -> (f64, f64, f64, u64) {
        let rate = p.fg.rate_per_s.value;
        let warmup = Nanos::from_us_f64(20.0 * 1e6 / rate);
        let duration = warmup + Nanos::from_us_f64(self.requests as f64 * 1e6 / rate);
        let mut s = build::spec(
            self.seed,
            vec![crate::spec::DeviceSpec::from_profile(p)],
            duration,
            warmup,
        );
        let (qmode, bg_mode) = match mode {
            // The time budget bounds what suspending a queue must drain, so it goes on the
            // preemptible background; the foreground keeps the paper's count threshold.
            ShareMode::XSched(level) => match build::xqueue(p, level) {
                QueueMode::XQueue { config, level } => (
                    QueueMode::XQueue { config, level },
                    QueueMode::XQueue {
                        config: config.with_inflight_budget(budget),
                        level,
                    },
                ),
                native => (native, native),
            },
            _ => (QueueMode::Native, QueueMode::Native),
        };
        s.queues.push(build::queue("fg", 0, qmode, 1));
        s.workloads.push(build::workload(
            "fg",
            build::fg_stage(p, 0),
            if self.poisson {
                Arrival::Poisson { rate_per_s: rate }
            } else {
                Arrival::Uniform { rate_per_s: rate }
            },
        ));
        if mode != ShareMode::Standalone {
            s.queues.push(build::queue("bg", 0, bg_mode, 0));
            s.workloads.push(build::workload(
                "bg",
                build::fg_stage(p, 1),
                build::SATURATING,
            ));
        }
        if matches!(mode, ShareMode::XSched(..)) {
            s.policy = Some(PolicySpec::registered("hpf"));
        }
        match simulate(s) {
            Ok(r) => {
                let fg = &r.workloads[0];
                let bg_share = r
                    .queue_work
                    .get(1)
                    .map_or(0.0, |w| w.0 as f64 / r.window.0.max(1) as f64);
                (
                    fg.quantile_us(0.5),
                    fg.quantile_us(0.99),
                    bg_share,
                    r.events,
                )
            }
            Err(_) => (f64::NAN, f64::NAN, f64::NAN, 0),
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let mut jobs = Vec::new();
        for (p, levels) in self.devices.iter().zip(&self.levels) {
            for mode in ShareMode::all(levels) {
                jobs.push((p, mode, None));
                if mode == ShareMode::XSched(Level::Block) && self.budget.is_some() {
                    jobs.push((p, mode, self.budget));
                }
            }
        }
        let results = build::par_map(&jobs, tick, |(p, m, b)| self.run_one(p, *m, *b));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut events = 0;
        let mut standalone = f64::NAN;
        for ((p, mode, budget), (p50, p99, bg, ev)) in jobs.iter().zip(results) {
            events += ev;
            if *mode == ShareMode::Standalone {
                standalone = p99;
            }
            let ratio = p99 / standalone;
            match mode {
                ShareMode::Native => checks.push(fg_bg::native_check(p.key, ratio)),
                ShareMode::XSched(l) => checks.push(fg_bg::xsched_check(
                    p.key,
                    *l,
                    budget.is_some(),
                    ratio,
                    XSCHED_MAX,
                )),
                ShareMode::Standalone => {}
            }
            rows.push(row(Row {
                device: p.key,
                mode: mode.name(),
                level: mode.level().map(Level::number),
                budget_us: budget.map(|b| round3(b.as_us_f64())),
                p50_us: round3(p50),
                p99_us: round3(p99),
                p99_ratio: round3(ratio),
                bg_device_share: round3(bg),
            }));
        }
        Report {
            experiment: "fg-bg".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        }
    }
}
