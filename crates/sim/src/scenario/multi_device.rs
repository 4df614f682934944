//! Two devices together (XSched §7.3): a foreground pipeline whose requests run a stage on
//! device A then a stage on device B, with a saturating background on each. Native, one
//! fixed-priority scheduler per device, and one global policy across both.
//!
//! Per-device scheduling makes each stage wait for the background's in-flight work to drain
//! on arrival; the global policy suspends the background on both devices from the moment a
//! foreground request arrives, so the second device is already clear when the pipeline
//! reaches it.

use super::build;
use super::{Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{Arrival, DeviceSpec, QueueMode};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::Nanos;
use xsched_core::PolicySpec;
use xsched_report::{columns_of, round3, row};
use xsched_workload::multi_device::{MODES, ShareMode, global_check};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pairs: Option<Vec<[Spanned<String>; 2]>>,
    requests: Option<Spanned<u64>>,
}

/// A checked multi-device experiment.
#[derive(Debug, Clone)]
pub struct MultiDevice {
    seed: u64,
    pairs: Vec<[Profile; 2]>,
    requests: u64,
}

#[derive(Serialize)]
struct Row {
    devices: String,
    mode: &'static str,
    p50_us: f64,
    p99_us: f64,
    p99_ratio: f64,
}

impl MultiDevice {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<MultiDevice, ScenarioError> {
        let pairs = match &f.pairs {
            Some(pairs) => pairs
                .iter()
                .map(|[a, b]| {
                    Ok([
                        build::device_named(ctx, "pairs", a)?,
                        build::device_named(ctx, "pairs", b)?,
                    ])
                })
                .collect::<Result<Vec<_>, ScenarioError>>()?,
            None => vec![[
                build::device_named(ctx, "pairs", &Spanned::new(0..0, "npu3720".into()))?,
                build::device_named(ctx, "pairs", &Spanned::new(0..0, "igpu".into()))?,
            ]],
        };
        let requests = match &f.requests {
            Some(r) => build::positive(ctx, "requests", r)?,
            None => 400,
        };
        Ok(MultiDevice {
            seed: ctx.header.seed,
            pairs,
            requests,
        })
    }

    fn run_one(&self, pair: &[Profile; 2], mode: ShareMode) -> (f64, f64, u64) {
        let standalone = build::fg_standalone(&pair[0]) + build::fg_standalone(&pair[1]);
        let rate = 0.2 * 1e9 / standalone.0 as f64;
        let warmup = Nanos::from_us_f64(20.0 * 1e6 / rate);
        let duration = warmup + Nanos::from_us_f64(self.requests as f64 * 1e6 / rate);
        let devices = pair.iter().map(DeviceSpec::from_profile).collect();
        let mut s = build::spec(self.seed, devices, duration, warmup);
        for (d, p) in pair.iter().enumerate() {
            let qmode = match mode.policy() {
                Some(_) => build::xqueue(p, p.max_level.value),
                None => QueueMode::Native,
            };
            s.queues
                .push(build::queue(&format!("fg-{}", p.key), d, qmode, 1));
            if mode != ShareMode::Standalone {
                s.queues
                    .push(build::queue(&format!("bg-{}", p.key), d, qmode, 0));
            }
        }
        let per_dev = if mode == ShareMode::Standalone { 1 } else { 2 };
        let mut fg = build::workload(
            "fg",
            build::fg_stage(&pair[0], 0),
            Arrival::Uniform { rate_per_s: rate },
        );
        fg.stages.push(build::fg_stage(&pair[1], per_dev));
        s.workloads.push(fg);
        if mode != ShareMode::Standalone {
            for (d, p) in pair.iter().enumerate() {
                s.workloads.push(build::workload(
                    "bg",
                    build::fg_stage(p, d * 2 + 1),
                    build::SATURATING,
                ));
            }
        }
        s.policy = mode.policy().map(PolicySpec::registered);
        match simulate(s) {
            Ok(r) => (
                r.workloads[0].quantile_us(0.5),
                r.workloads[0].quantile_us(0.99),
                r.events,
            ),
            Err(_) => (f64::NAN, f64::NAN, 0),
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let jobs: Vec<(&[Profile; 2], ShareMode)> = self
            .pairs
            .iter()
            .flat_map(|pair| MODES.map(|m| (pair, m)))
            .collect();
        let results = build::par_map(&jobs, tick, |(pair, m)| self.run_one(pair, *m));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        let mut events = 0;
        let mut standalone = f64::NAN;
        let mut per_device = f64::NAN;
        for ((pair, mode), (p50, p99, ev)) in jobs.iter().zip(results) {
            events += ev;
            if *mode == ShareMode::Standalone {
                standalone = p99;
            }
            let ratio = p99 / standalone;
            let devices = format!("{}+{}", pair[0].key, pair[1].key);
            match mode {
                ShareMode::PerDevice => per_device = ratio,
                ShareMode::Global => checks.push(global_check(&devices, ratio, per_device)),
                _ => {}
            }
            rows.push(row(Row {
                devices,
                mode: mode.name(),
                p50_us: round3(p50),
                p99_us: round3(p99),
                p99_ratio: round3(ratio),
            }));
        }
        Report {
            experiment: "multi-device".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: Some(events),
        }
    }
}
