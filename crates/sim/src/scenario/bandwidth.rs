//! Bandwidth partition (XSched Fig. 10): two saturating processes with 75:25 requested. Native
//! hardware splits about evenly; xsched's bandwidth policy enforces the shares with time slices.
//! Shares are each process's throughput over its throughput alone on the device.

use super::build;
use super::{Check, Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{DeviceSpec, QueueMode};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::PolicySpec;
use xsched_core::{Hint, Nanos};
use xsched_report::{Verdict, columns_of, round3, row};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    shares: Option<Spanned<[u32; 2]>>,
    slices: Option<Spanned<u64>>,
}

/// A checked bandwidth experiment.
#[derive(Debug, Clone)]
pub struct BandwidthScenario {
    seed: u64,
    devices: Vec<Profile>,
    shares: [u32; 2],
    slices: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum ShareMode {
    Alone,
    Native,
    XSched,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    mode: &'static str,
    fg_share: f64,
    bg_share: f64,
    total_throughput_ratio: f64,
}

impl BandwidthScenario {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<BandwidthScenario, ScenarioError> {
        let shares = match &f.shares {
            Some(s) if s.get_ref().contains(&0) => {
                return Err(ctx.err(s.span(), "field `shares`: shares must be positive".into()));
            }
            Some(s) => *s.get_ref(),
            None => [75, 25],
        };
        let slices = match &f.slices {
            Some(s) => build::positive(ctx, "slices", s)?,
            None => 200,
        };
        Ok(BandwidthScenario {
            seed: ctx.header.seed,
            devices: build::devices(ctx, &f.devices)?,
            shares,
            slices,
        })
    }

    fn run_one(&self, p: &Profile, mode: ShareMode) -> ([f64; 2], u64) {
        let slice = p.bandwidth_slice.value;
        // Enough slices of both processes, and enough requests, for a stable split.
        let by_slices = Nanos(slice.0 * self.slices);
        let by_requests = Nanos(build::fg_standalone(p).0 * 200);
        let duration = by_slices.max(by_requests);
        let warmup = Nanos(duration.0 / 10);
        let mut s = build::spec(
            self.seed,
            vec![DeviceSpec::from_profile(p)],
            duration + warmup,
            warmup,
        );
        let qmode = match mode {
            ShareMode::XSched => build::xqueue(p, p.max_level.value),
            _ => QueueMode::Native,
        };
        let n = if mode == ShareMode::Alone { 1 } else { 2 };
        for (i, name) in ["fg", "bg"].iter().enumerate().take(n) {
            let mut q = build::queue(name, 0, qmode, 0);
            for hint in [Hint::Share(self.shares[i]), Hint::TimeSlice(slice)] {
                // Shares were validated positive and slices are positive in every profile.
                let _ = q.hints.apply(hint);
            }
            s.queues.push(q);
            s.workloads.push(build::workload(
                name,
                build::fg_stage(p, i),
                build::SATURATING,
            ));
        }
        if mode == ShareMode::XSched {
            s.policy = Some(PolicySpec::registered("bandwidth"));
        }
        match simulate(s) {
            Ok(r) => {
                let rate = |i: usize| {
                    r.queue_work
                        .get(i)
                        .map_or(0.0, |w| w.0 as f64 / r.window.0.max(1) as f64)
                };
                ([rate(0), rate(1)], r.events)
            }
            Err(_) => ([f64::NAN; 2], 0),
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let jobs: Vec<(&Profile, ShareMode)> = self
            .devices
            .iter()
            .flat_map(|p| {
                [
                    (p, ShareMode::Alone),
                    (p, ShareMode::Native),
                    (p, ShareMode::XSched),
                ]
            })
            .collect();
        let results = build::par_map(&jobs, tick, |(p, m)| self.run_one(p, *m));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut events = 0;
        let mut alone = f64::NAN;
        let want = f64::from(self.shares[0]) / f64::from(self.shares[0] + self.shares[1]);
        for ((p, mode), (rates, ev)) in jobs.iter().zip(results) {
            events += ev;
            if *mode == ShareMode::Alone {
                alone = rates[0];
                continue;
            }
            let fg = rates[0] / alone;
            let bg = rates[1] / alone;
            let total = fg + bg;
            if *mode == ShareMode::XSched {
                checks.push(Check {
                    name: format!("{} xsched fg share", p.key),
                    target: format!("{:.0} % +- 3 points", want * 100.0),
                    measured: format!("{:.1} %", fg * 100.0),
                    verdict: Verdict::of((fg - want).abs() <= 0.03),
                });
                checks.push(Check {
                    name: format!("{} xsched total throughput", p.key),
                    target: ">= 0.97 of one process alone".into(),
                    measured: format!("{total:.3}"),
                    verdict: Verdict::of(total >= 0.97),
                });
            }
            rows.push(row(Row {
                device: p.key,
                mode: if *mode == ShareMode::Native {
                    "native"
                } else {
                    "xsched"
                },
                fg_share: round3(fg),
                bg_share: round3(bg),
                total_throughput_ratio: round3(total),
            }));
        }
        Report {
            experiment: "bandwidth".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        }
    }
}
