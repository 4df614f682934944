//! Hummingbird's study (../shared/docs/PAPERS.md §2): an HP service with idle gaps beside an
//! endless LP job, under every way of sharing the device (see [`crate::harvest`]), and the
//! effect of the LP slice length. The SLO is HP's standalone P99 latency × `slo_factor`.

use super::build;
use super::{Check, Ctx, Report, ScenarioError};
use crate::device::Arbitration;
use crate::harvest::{self, HarvestRun, Params, SharePolicy};
use crate::profile::Profile;
use serde::{Deserialize, Serialize};
use toml::Spanned;
use xsched_core::{Level, Nanos};
use xsched_report::{Verdict, columns_of, round3, row};
use xsched_workload::service::{DurationRange, HpRequest, HpShape};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    devices: Option<Spanned<Vec<String>>>,
    requests: Option<Spanned<u64>>,
    kernels: Option<Spanned<u64>>,
    kernel_us: Spanned<[u64; 2]>,
    gap_us: Spanned<[u64; 2]>,
    pre_us: Option<Spanned<[u64; 2]>>,
    post_us: Option<Spanned<[u64; 2]>>,
    device_share: Option<Spanned<f64>>,
    arrivals: Option<Spanned<String>>,
    slo_factor: Option<Spanned<f64>>,
    lp_kernel_us: Option<Spanned<u64>>,
    slice_us: Option<Spanned<u64>>,
    tile_us: Option<Spanned<u64>>,
    slice_sweep_us: Option<Spanned<Vec<u64>>>,
    timeslice_sweep_us: Option<Spanned<Vec<u64>>>,
    launch_overhead_us: Option<Spanned<u64>>,
    margin_us: Option<Spanned<u64>>,
    kill_us: Option<Spanned<u64>>,
    spatial_speedup: Option<Spanned<f64>>,
}

/// A checked Hummingbird experiment.
#[derive(Debug, Clone)]
pub struct Hummingbird {
    seed: u64,
    devices: Vec<Profile>,
    shape: HpShape,
    slo_factor: f64,
    lp_kernel: Nanos,
    slice: Nanos,
    tile: Nanos,
    sweep: Vec<Nanos>,
    timeslice_sweep: Vec<Nanos>,
    launch_overhead: Nanos,
    margin: Nanos,
    kill: Nanos,
    spatial_speedup: f64,
}

#[derive(Serialize)]
struct Row {
    device: &'static str,
    policy: &'static str,
    slice_us: Option<f64>,
    hp_slo_attainment: f64,
    lp_throughput_norm: f64,
    utilization: f64,
    preempt_p99_us: Option<f64>,
}

fn span(ctx: &Ctx, field: &str, v: &Spanned<[u64; 2]>) -> Result<DurationRange, ScenarioError> {
    let [lo, hi] = *v.get_ref();
    if lo > hi {
        return Err(ctx.err(
            v.span(),
            format!("field `{field}`: [min, max] with min <= max"),
        ));
    }
    Ok(DurationRange::us(lo, hi))
}

fn micros(
    ctx: &Ctx,
    field: &str,
    v: &Option<Spanned<u64>>,
    default: u64,
) -> Result<Nanos, ScenarioError> {
    match v {
        None => Ok(Nanos::from_us(default)),
        Some(x) => Ok(Nanos::from_us(build::positive(ctx, field, x)?)),
    }
}

/// The profiles named by `devices`, each of which must time-slice natively.
fn timeslicing_devices(
    ctx: &Ctx,
    sel: &Option<Spanned<Vec<String>>>,
) -> Result<Vec<Profile>, ScenarioError> {
    let devices = build::devices(ctx, sel)?;
    if let (Some(sel), Some(p)) = (
        sel,
        devices
            .iter()
            .find(|p| !matches!(p.arbitration.value, Arbitration::TimeSlice { .. })),
    ) {
        return Err(ctx.err(
            sel.span(),
            format!(
                "field `devices`: `{}` does not time-slice natively; the `timeslice` baseline needs a device that does (gv100, k40m, igpu)",
                p.key
            ),
        ));
    }
    Ok(devices)
}

/// The HP service's shape from the file's fields; its kernels must take time.
fn hp_shape(ctx: &Ctx, f: &File) -> Result<HpShape, ScenarioError> {
    let optional = |field: &str, v: &Option<Spanned<[u64; 2]>>| match v {
        Some(v) => span(ctx, field, v),
        None => Ok(DurationRange::us(0, 0)),
    };
    let shape = HpShape {
        kernels: f
            .kernels
            .as_ref()
            .map(|k| build::positive(ctx, "kernels", k))
            .transpose()?
            .unwrap_or(8)
            .min(10_000) as u32,
        kernel: span(ctx, "kernel_us", &f.kernel_us)?,
        gap: span(ctx, "gap_us", &f.gap_us)?,
        pre: optional("pre_us", &f.pre_us)?,
        post: optional("post_us", &f.post_us)?,
        device_share: build::fraction(ctx, "device_share", &f.device_share, 0.5, 0.95)?,
        poisson: poisson_arrivals(ctx, &f.arrivals)?,
        requests: f
            .requests
            .as_ref()
            .map(|r| build::positive(ctx, "requests", r))
            .transpose()?
            .unwrap_or(1000)
            .min(1_000_000) as u32,
    };
    if shape.kernel.lo == Nanos::ZERO {
        return Err(ctx.err(
            f.kernel_us.span(),
            "field `kernel_us`: kernels take time".into(),
        ));
    }
    Ok(shape)
}

/// Whether `arrivals` asks for Poisson (rather than periodic) HP arrivals.
fn poisson_arrivals(ctx: &Ctx, v: &Option<Spanned<String>>) -> Result<bool, ScenarioError> {
    match v {
        None => Ok(false),
        Some(a) => match a.get_ref().as_str() {
            "poisson" => Ok(true),
            "periodic" => Ok(false),
            other => Err(ctx.err(
                a.span(),
                format!("field `arrivals`: `{other}`; expected periodic or poisson"),
            )),
        },
    }
}

/// The swept LP slice lengths, each a positive multiple of `tile`.
fn slice_sweep(
    ctx: &Ctx,
    v: &Option<Spanned<Vec<u64>>>,
    tile: Nanos,
) -> Result<Vec<Nanos>, ScenarioError> {
    match v {
        None => Ok(Vec::new()),
        Some(s)
            if s.get_ref()
                .iter()
                .any(|&us| us == 0 || us % (tile.0 / 1000).max(1) != 0) =>
        {
            Err(ctx.err(
                s.span(),
                "field `slice_sweep_us`: positive multiples of `tile_us`".into(),
            ))
        }
        Some(s) => Ok(s.get_ref().iter().map(|&us| Nanos::from_us(us)).collect()),
    }
}

/// The swept time-slice quanta, each positive.
fn timeslice_quanta(ctx: &Ctx, v: &Option<Spanned<Vec<u64>>>) -> Result<Vec<Nanos>, ScenarioError> {
    match v {
        None => Ok(Vec::new()),
        Some(s) if s.get_ref().contains(&0) => Err(ctx.err(
            s.span(),
            "field `timeslice_sweep_us`: time slices take time".into(),
        )),
        Some(s) => Ok(s.get_ref().iter().map(|&us| Nanos::from_us(us)).collect()),
    }
}

impl Hummingbird {
    pub(crate) fn check(f: File, ctx: &Ctx) -> Result<Hummingbird, ScenarioError> {
        let devices = timeslicing_devices(ctx, &f.devices)?;
        let shape = hp_shape(ctx, &f)?;
        let slice = micros(ctx, "slice_us", &f.slice_us, 100)?;
        let tile = micros(ctx, "tile_us", &f.tile_us, 10)?;
        if slice.0 % tile.0 != 0 {
            let at = f.slice_us.as_ref().map_or(0..0, Spanned::span);
            return Err(ctx.err(
                at,
                "field `slice_us`: must be a multiple of `tile_us`".into(),
            ));
        }
        let sweep = slice_sweep(ctx, &f.slice_sweep_us, tile)?;
        let timeslice_sweep = timeslice_quanta(ctx, &f.timeslice_sweep_us)?;
        Ok(Hummingbird {
            timeslice_sweep,
            seed: ctx.header.seed,
            devices,
            shape,
            slo_factor: build::fraction(ctx, "slo_factor", &f.slo_factor, 1.0, 100.0)?,
            lp_kernel: micros(ctx, "lp_kernel_us", &f.lp_kernel_us, 5000)?,
            slice,
            tile,
            sweep,
            launch_overhead: f
                .launch_overhead_us
                .as_ref()
                .map_or(Nanos::from_us(10), |v| Nanos::from_us(*v.get_ref())),
            margin: f
                .margin_us
                .as_ref()
                .map_or(Nanos::from_us(50), |v| Nanos::from_us(*v.get_ref())),
            kill: micros(ctx, "kill_us", &f.kill_us, 50)?,
            spatial_speedup: build::fraction(
                ctx,
                "spatial_speedup",
                &f.spatial_speedup,
                1.14,
                2.0,
            )?,
        })
    }

    /// The run parameters on `p`; `quantum` overrides the device's native time slice.
    fn params(&self, p: &Profile, slo: Nanos, slice: Nanos, quantum: Option<Nanos>) -> Params {
        let (native, switch) = match p.arbitration.value {
            Arbitration::TimeSlice { slice, switch } => (slice, switch),
            _ => (Nanos::from_ms(1), Nanos::from_us(25)),
        };
        let timeslice = quantum.unwrap_or(native);
        Params {
            lp_kernel: self.lp_kernel,
            slice,
            tile: self.tile,
            launch_overhead: self.launch_overhead,
            kill: if p.max_level.value >= Level::Interrupt {
                p.interrupt.value
            } else {
                self.kill
            },
            timeslice,
            switch,
            spatial_speedup: self.spatial_speedup,
            slo,
            margin: self.margin,
        }
    }

    pub(crate) fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        let hp = self.shape.generate(self.seed);
        let results = build::par_map(&self.devices, tick, |p| self.run_device(p, &hp));
        let mut rows = Vec::new();
        let mut checks = Vec::new();
        for (r, c) in results {
            rows.extend(r);
            checks.extend(c);
        }
        Report {
            experiment: "hummingbird".into(),
            columns: columns_of(&rows),
            rows,
            checks,
            events: None,
        }
    }

    fn run_device(
        &self,
        p: &Profile,
        hp: &[HpRequest],
    ) -> (Vec<serde_json::Map<String, serde_json::Value>>, Vec<Check>) {
        let standalone = harvest::run(
            SharePolicy::Standalone,
            hp,
            &self.params(p, Nanos::ZERO, self.slice, None),
        );
        let p99 = standalone.p99().unwrap_or(Nanos::ZERO);
        let slo = Nanos((p99.0 as f64 * self.slo_factor).round() as u64);
        let mut rows = Vec::new();
        let mut by_policy: Vec<(SharePolicy, HarvestRun)> = Vec::new();
        let mk = |policy: SharePolicy, slice: Option<Nanos>, o: &HarvestRun| {
            let delays = xsched_report::quantile(&o.preempt_delays, 0.99);
            row(Row {
                device: p.key,
                policy: policy.name(),
                slice_us: slice.map(|s| round3(s.as_us_f64())),
                hp_slo_attainment: round3(o.attainment(slo)),
                lp_throughput_norm: round3(o.lp_throughput_norm()),
                utilization: round3(o.utilization()),
                preempt_p99_us: delays.map(|d| round3(d.as_us_f64())),
            })
        };
        for policy in SharePolicy::ALL {
            let o = if policy == SharePolicy::Standalone {
                standalone.clone()
            } else {
                harvest::run(policy, hp, &self.params(p, slo, self.slice, None))
            };
            let shown = match policy {
                SharePolicy::Priority | SharePolicy::SloAware => Some(self.slice),
                SharePolicy::Timeslice => Some(self.params(p, slo, self.slice, None).timeslice),
                _ => None,
            };
            rows.push(mk(policy, shown, &o));
            by_policy.push((policy, o));
        }
        for &s in &self.sweep {
            let o = harvest::run(SharePolicy::SloAware, hp, &self.params(p, slo, s, None));
            rows.push(mk(SharePolicy::SloAware, Some(s), &o));
        }
        let mut quanta = Vec::new();
        for &q in &self.timeslice_sweep {
            let params = self.params(p, slo, self.slice, Some(q));
            let o = harvest::run(SharePolicy::Timeslice, hp, &params);
            rows.push(mk(SharePolicy::Timeslice, Some(q), &o));
            quanta.push((q, o));
        }
        let mut checks = self.checks(p, slo, &by_policy);
        checks.extend(timeslice_check(p, slo, &by_policy, &quanta));
        (rows, checks)
    }

    fn checks(&self, p: &Profile, slo: Nanos, runs: &[(SharePolicy, HarvestRun)]) -> Vec<Check> {
        let get = |want: SharePolicy| runs.iter().find(|(pol, _)| *pol == want).map(|(_, o)| o);
        let (Some(alone), Some(slo_aware), Some(prio), Some(ts), Some(spatial)) = (
            get(SharePolicy::Standalone),
            get(SharePolicy::SloAware),
            get(SharePolicy::Priority),
            get(SharePolicy::Timeslice),
            get(SharePolicy::Spatial),
        ) else {
            return Vec::new();
        };
        let (a0, a) = (alone.attainment(slo), slo_aware.attainment(slo));
        let (lp, lp_prio, lp_ts) = (
            slo_aware.lp_throughput_norm(),
            prio.lp_throughput_norm(),
            ts.lp_throughput_norm(),
        );
        let key = p.key;
        vec![
            Check {
                name: format!("{key} slo-aware HP attainment vs standalone"),
                target: "within 0.01".into(),
                measured: format!("{a:.3} vs {a0:.3}"),
                verdict: Verdict::of(a >= a0 - 0.01),
            },
            Check {
                name: format!("{key} slo-aware LP throughput vs priority"),
                target: ">= 2x (Hummingbird: 2.4x)".into(),
                measured: format!("{lp:.3} vs {lp_prio:.3} ({:.2}x)", lp / lp_prio.max(1e-9)),
                verdict: Verdict::of(lp >= 2.0 * lp_prio),
            },
            Check {
                name: format!("{key} slo-aware LP throughput vs timeslice"),
                target: "above".into(),
                measured: format!(
                    "{lp:.3} vs {lp_ts:.3} (timeslice HP attainment {:.3})",
                    ts.attainment(slo)
                ),
                verdict: Verdict::of(lp > lp_ts),
            },
            Check {
                name: format!(
                    "{key} utilization with slo-aware (HP alone uses {:.2})",
                    alone.utilization()
                ),
                target: ">= 0.90".into(),
                measured: format!("{:.3}", slo_aware.utilization()),
                verdict: Verdict::of(slo_aware.utilization() >= 0.9),
            },
            Check {
                name: format!("{key} spatial and timeslice HP attainment"),
                target: "none".into(),
                measured: format!(
                    "spatial {:.3}, timeslice {:.3} (SLO {:.0} us)",
                    spatial.attainment(slo),
                    ts.attainment(slo),
                    slo.as_us_f64()
                ),
                verdict: Verdict::Reported,
            },
        ]
    }
}

/// The best HP attainment over the swept time-slice `quanta` on `p`, against slo-aware's in
/// `runs`; none without both.
fn timeslice_check(
    p: &Profile,
    slo: Nanos,
    runs: &[(SharePolicy, HarvestRun)],
    quanta: &[(Nanos, HarvestRun)],
) -> Option<Check> {
    let (Some((_, slo_aware)), false) = (
        runs.iter().find(|(pol, _)| *pol == SharePolicy::SloAware),
        quanta.is_empty(),
    ) else {
        return None;
    };
    let a = slo_aware.attainment(slo);
    let (q, best_a, lp) = quanta
        .iter()
        .map(|(q, o)| (q, o.attainment(slo), o.lp_throughput_norm()))
        .max_by(|x, y| x.1.total_cmp(&y.1))?;
    Some(Check {
        name: format!("{} timeslice at slo-aware's attainment ({a:.3})", p.key),
        target: "none: the best attainment over the swept quanta".into(),
        measured: format!(
            "{best_a:.3} at {:.0} us (LP {lp:.3}){}",
            q.as_us_f64(),
            if best_a >= a {
                ""
            } else {
                ": no quantum reaches it"
            }
        ),
        verdict: Verdict::Reported,
    })
}
