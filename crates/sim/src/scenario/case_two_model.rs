//! XSched's two-model serving case study (PAPERS.md §1, "Case studies"): two BERT-large
//! services share one GPU, one in the foreground; the foreground's P99 latency over standalone
//! is compared across request rates. Native sharing time-slices them; a Triton-like server
//! orders requests by priority but cannot hold back the kernels of a request it already
//! started; xsched suspends the background at the device's highest level; a Paella-like
//! dispatcher hands each client's kernels to the device one or two at a time (the background
//! held between kernels while the foreground has work) through one central dispatcher whose
//! launches take turns, paying a cost per kernel. The workload's numbers and their
//! sources are in the scenario file (`scenarios/xsched-case-two-model.toml`).
//!
//! Rows: rate (both services together, half each), mode, level, the foreground's P50 and P99
//! and its P99 over standalone, and the background's device share.

use super::build::{self, Commands, HOUR_MS, MAX_COMMANDS, bounded, commands};
use super::{Ctx, Report, ScenarioError};
use crate::engine::simulate;
use crate::profile::Profile;
use crate::spec::{Arrival, DeviceSpec, QueueMode};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::PolicySpec;
use xsched_core::{LaunchConfig, Level, Nanos};
use xsched_report::plot::Figure;
use xsched_report::{columns_of, round3, row};
use xsched_workload::two_model::{self, MODES, Ratios, ShareMode};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    device: Option<Spanned<String>>,
    level: Option<Spanned<u8>>,
    rates: Option<Spanned<Vec<u64>>>,
    seconds: Option<Spanned<u64>>,
    request_commands: Option<Spanned<u64>>,
    request_cmd_us: Option<Spanned<[u64; 2]>>,
    paella_dispatch_ns: Option<Spanned<u64>>,
    paella_notify_ns: Option<Spanned<u64>>,
}

/// A checked two-model study.
#[derive(Debug, Clone)]
pub struct TwoModel {
    seed: u64,
    device: Profile,
    level: Level,
    rates: Vec<u64>,
    seconds: u64,
    request: Commands,
    paella_dispatch: Nanos,
    paella_notify: Nanos,
}

#[derive(Serialize)]
struct Row {
    rate: u64,
    mode: &'static str,
    level: Option<u8>,
    fg_p50_us: f64,
    fg_p99_us: f64,
    fg_p99_ratio: f64,
    bg_device_share: f64,
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    p50_us: f64,
    p99_us: f64,
    bg_share: f64,
    events: u64,
}

const WARMUP: Nanos = Nanos::from_ms(500);

impl TwoModel {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<TwoModel, ScenarioError> {
        let device = build::device_or(ctx, "device", &f.device, "gv100")?;
        let level = build::level_on(ctx, &f.level, &device)?;
        let rates = match &f.rates {
            None => vec![100, 200, 400, 600, 800, 1000],
            Some(r) if r.get_ref().is_empty() || r.get_ref().contains(&0) => {
                return Err(ctx.err(
                    r.span(),
                    "field `rates`: one or more positive requests per second".into(),
                ));
            }
            Some(r) if r.get_ref().iter().any(|x| *x > 1_000_000) => {
                return Err(ctx.err(r.span(), "field `rates`: at most 1 000 000".into()));
            }
            Some(r) if r.get_ref().windows(2).any(|w| w[0] >= w[1]) => {
                return Err(ctx.err(r.span(), "field `rates`: in increasing order".into()));
            }
            Some(r) => r.get_ref().clone(),
        };
        let n = bounded(
            ctx,
            "request_commands",
            &f.request_commands,
            40,
            MAX_COMMANDS,
        )?;
        let ns = |field, v: &Option<Spanned<u64>>, default| {
            bounded(ctx, field, v, default, HOUR_MS * 1_000_000).map(Nanos)
        };
        Ok(TwoModel {
            seed: ctx.header.seed,
            level,
            rates,
            seconds: bounded(ctx, "seconds", &f.seconds, 10, 86_400)?,
            request: commands(ctx, "request_cmd_us", n, &f.request_cmd_us, [10, 30])?,
            paella_dispatch: ns("paella_dispatch_ns", &f.paella_dispatch_ns, 3000)?,
            paella_notify: ns("paella_notify_ns", &f.paella_notify_ns, 2000)?,
            device,
        })
    }

    fn run_one(&self, rate: u64, mode: ShareMode) -> Measured {
        let p = &self.device;
        let duration = WARMUP + Nanos::from_ms(1000 * self.seconds);
        let mut dev = DeviceSpec::from_profile(p);
        let qmode = match mode {
            ShareMode::Standalone | ShareMode::Native => QueueMode::Native,
            // Every command launched at once: requests ordered, nothing on the device held.
            ShareMode::Triton => QueueMode::XQueue {
                config: LaunchConfig::UNBOUNDED,
                level: Level::Block,
            },
            ShareMode::XSched => build::xqueue(p, self.level),
            ShareMode::Paella => {
                // One dispatcher for both clients, a cost per kernel, and its completion
                // notifications instead of the driver's synchronization.
                dev.intercept = self.paella_dispatch;
                dev.sync = self.paella_notify;
                dev.shared_launcher = true;
                QueueMode::XQueue {
                    config: LaunchConfig::new(2, 1).unwrap_or(LaunchConfig::DEFAULT),
                    level: Level::Block,
                }
            }
        };
        let mut s = build::spec(self.seed, vec![dev], duration, WARMUP);
        s.own_streams = true;
        let each = Arrival::Poisson {
            rate_per_s: rate as f64 / 2.0,
        };
        s.queues.push(build::queue("foreground", 0, qmode, 1));
        s.workloads
            .push(build::workload("foreground", self.request.on(0), each));
        if mode != ShareMode::Standalone {
            s.queues.push(build::queue("background", 0, qmode, 0));
            s.workloads
                .push(build::workload("background", self.request.on(1), each));
            s.policy = (!matches!(mode, ShareMode::Native)).then(|| PolicySpec::registered("hpf"));
        }
        match simulate(s) {
            Ok(r) => Measured {
                p50_us: r.workloads[0].quantile_us(0.5),
                p99_us: r.workloads[0].quantile_us(0.99),
                bg_share: r
                    .queue_work
                    .get(1)
                    .map_or(0.0, |w| w.0 as f64 / r.window.0.max(1) as f64),
                events: r.events,
            },
            Err(_) => Measured {
                p50_us: f64::NAN,
                p99_us: f64::NAN,
                bg_share: f64::NAN,
                events: 0,
            },
        }
    }

    /// The report, and the P99-ratio-against-rate figure.
    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> (Report, Vec<Figure>) {
        let runs: Vec<(u64, ShareMode)> = self
            .rates
            .iter()
            .flat_map(|&r| MODES.iter().map(move |m| (r, *m)))
            .collect();
        let results = build::par_map(&runs, tick, |&(rate, mode)| self.run_one(rate, mode));
        let mut rows = Vec::new();
        let mut ratios = Vec::new();
        let mut events = 0;
        for (k, &rate) in self.rates.iter().enumerate() {
            let at = &results[k * MODES.len()..(k + 1) * MODES.len()];
            let alone = at[0].p99_us;
            let ratio = |m: &Measured| m.p99_us / alone;
            for (mode, m) in MODES.iter().zip(at) {
                events += m.events;
                rows.push(row(Row {
                    rate,
                    mode: mode.name(),
                    level: match mode {
                        ShareMode::Standalone | ShareMode::Native => None,
                        ShareMode::XSched => Some(self.level.number()),
                        ShareMode::Triton | ShareMode::Paella => Some(Level::Block.number()),
                    },
                    fg_p50_us: round3(m.p50_us),
                    fg_p99_us: round3(m.p99_us),
                    fg_p99_ratio: round3(ratio(m)),
                    bg_device_share: round3(m.bg_share),
                }));
            }
            ratios.push(Ratios {
                rate: rate as f64,
                native: ratio(&at[1]),
                triton: ratio(&at[2]),
                xsched: ratio(&at[3]),
                paella: ratio(&at[4]),
            });
        }
        let figure = two_model::ratio_figure(
            "case-two-model-p99-ratio",
            format!(
                "Two-model serving on {} (simulated): foreground P99 over standalone",
                self.device.name
            ),
            &ratios,
        );
        let report = Report {
            experiment: "case-two-model".into(),
            columns: columns_of(&rows),
            rows,
            checks: two_model::checks(&ratios),
            events: Some(events),
        };
        (report, vec![figure])
    }
}
