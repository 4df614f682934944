//! Pieces every experiment builds runs from: device and level selection with errors at the
//! right line, queue and workload specs from a profile, rows, and parallel execution.

use super::{Ctx, ScenarioError};
use crate::profile::{self, Profile};
use crate::spec::{Arrival, DeviceSpec, QueueMode, QueueSpec, SimSpec, StageSpec, WorkloadSpec};
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use toml::Spanned;
use xsched_core::{Level, Nanos, QueueHints};

/// Default seed when a scenario gives none.
pub(crate) fn default_seed() -> u64 {
    1
}

/// How long an in-process scheduler takes from event to operation (a thread wake-up).
pub(crate) const SCHED_LATENCY: Nanos = Nanos::from_us(5);

/// The profiles named by `devices` (`["all"]` or omitted: all ten).
pub(crate) fn devices(
    ctx: &Ctx,
    sel: &Option<Spanned<Vec<String>>>,
) -> Result<Vec<Profile>, ScenarioError> {
    let Some(sel) = sel else {
        return Ok(profile::all());
    };
    if sel.get_ref().iter().any(|d| d == "all") {
        return Ok(profile::all());
    }
    if sel.get_ref().is_empty() {
        return Err(ctx.err(sel.span(), "field `devices`: names no device".into()));
    }
    sel.get_ref()
        .iter()
        .map(|k| {
            profile::by_key(k).ok_or_else(|| {
                ctx.err(
                    sel.span(),
                    format!(
                        "field `devices`: unknown device `{k}`; known: all, {}",
                        profile::keys().join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// One profile by key, for fields that name exactly one.
pub(crate) fn device_named(
    ctx: &Ctx,
    field: &str,
    key: &Spanned<String>,
) -> Result<Profile, ScenarioError> {
    profile::by_key(key.get_ref()).ok_or_else(|| {
        ctx.err(
            key.span(),
            format!(
                "field `{field}`: unknown device `{}`; known: {}",
                key.get_ref(),
                profile::keys().join(", ")
            ),
        )
    })
}

/// Per device, the levels to run: those listed (each must be supported by every device,
/// never silently skipped), or every level the device supports.
pub(crate) fn levels(
    ctx: &Ctx,
    sel: &Option<Spanned<Vec<u8>>>,
    devices: &[Profile],
) -> Result<Vec<Vec<Level>>, ScenarioError> {
    devices
        .iter()
        .map(|p| match sel {
            None => Ok(Level::ALL
                .into_iter()
                .filter(|l| *l <= p.max_level.value)
                .collect()),
            Some(sel) => sel
                .get_ref()
                .iter()
                .map(|&n| {
                    let level = Level::try_from(n)
                        .map_err(|e| ctx.err(sel.span(), format!("field `levels`: {e}")))?;
                    p.capabilities().check_level(level).map_err(|e| {
                        ctx.err(
                            sel.span(),
                            format!("field `levels`: device `{}`: {e}", p.key),
                        )
                    })?;
                    Ok(level)
                })
                .collect(),
        })
        .collect()
}

/// The profile a one-device field names, or the study's own device `default` when absent.
pub(crate) fn device_or(
    ctx: &Ctx,
    field: &str,
    key: &Option<Spanned<String>>,
    default: &str,
) -> Result<Profile, ScenarioError> {
    match key {
        Some(k) => device_named(ctx, field, k),
        None => profile::by_key(default).ok_or_else(|| {
            ctx.err(
                0..0,
                format!("field `{field}`: the {default} profile is missing"),
            )
        }),
    }
}

/// The level a one-level field (`level`) asks of `p`: the device's highest when absent, and an
/// error at the field when the device lacks it (never a downgrade).
pub(crate) fn level_on(
    ctx: &Ctx,
    field: &Option<Spanned<u8>>,
    p: &Profile,
) -> Result<Level, ScenarioError> {
    let Some(l) = field else {
        return Ok(p.max_level.value);
    };
    let level = Level::try_from(*l.get_ref())
        .map_err(|e| ctx.err(l.span(), format!("field `level`: {e}")))?;
    p.capabilities()
        .check_level(level)
        .map_err(|e| ctx.err(l.span(), format!("field `level`: device `{}`: {e}", p.key)))?;
    Ok(level)
}

/// A positive count, or an error at its span.
pub(crate) fn positive(ctx: &Ctx, field: &str, v: &Spanned<u64>) -> Result<u64, ScenarioError> {
    if *v.get_ref() == 0 {
        return Err(ctx.err(v.span(), format!("field `{field}`: must be positive")));
    }
    Ok(*v.get_ref())
}

/// A run skeleton.
pub(crate) fn spec(seed: u64, devices: Vec<DeviceSpec>, duration: Nanos, warmup: Nanos) -> SimSpec {
    SimSpec {
        seed,
        duration,
        warmup,
        devices,
        queues: Vec::new(),
        workloads: Vec::new(),
        policy: None,
        sched_latency: SCHED_LATENCY,
        probe: None,
        own_streams: false,
    }
}

/// A queue on `device` with a priority (and otherwise default hints).
pub(crate) fn queue(name: &str, device: usize, mode: QueueMode, priority: i32) -> QueueSpec {
    QueueSpec {
        name: name.to_string(),
        device,
        mode,
        hints: QueueHints {
            priority,
            ..QueueHints::default()
        },
        declared_estimates: false,
    }
}

/// A profile's XQueue mode at `level` with its published launch config.
pub(crate) fn xqueue(p: &Profile, level: Level) -> QueueMode {
    QueueMode::XQueue {
        config: p.launch_config(),
        level,
    }
}

/// The profile's foreground request as a stage on `queue`.
pub(crate) fn fg_stage(p: &Profile, queue: usize) -> StageSpec {
    StageSpec {
        queue,
        commands: p.fg.commands.value,
        cmd_min: p.fg.cmd_min.value,
        cmd_max: p.fg.cmd_max.value,
    }
}

/// A one-stage workload.
pub(crate) fn workload(name: &str, stage: StageSpec, arrival: Arrival) -> WorkloadSpec {
    WorkloadSpec {
        name: name.to_string(),
        stages: vec![stage],
        arrival,
        deadline: None,
        idempotent: false,
    }
}

/// A saturating background: back-to-back requests.
pub(crate) const SATURATING: Arrival = Arrival::Closed { think: Nanos::ZERO };

/// Standalone time of the profile's fg request (commands x mean command).
pub(crate) fn fg_standalone(p: &Profile) -> Nanos {
    Nanos(p.fg.cmd_mean().0 * u64::from(p.fg.commands.value))
}

/// Run `f` over `items` on all cores, in order, ticking progress.
pub(crate) fn par_map<T: Sync, R: Send>(
    items: &[T],
    tick: &(dyn Fn(usize, usize) + Sync),
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let done = AtomicUsize::new(0);
    items
        .par_iter()
        .map(|it| {
            let r = f(it);
            tick(done.fetch_add(1, Ordering::Relaxed) + 1, items.len());
            r
        })
        .collect()
}

/// A request's commands: how many, and each one's length range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Commands {
    pub(crate) count: u32,
    pub(crate) min: Nanos,
    pub(crate) max: Nanos,
}

impl Commands {
    /// These commands as a stage on `queue`.
    pub(crate) fn on(self, queue: usize) -> StageSpec {
        StageSpec {
            queue,
            commands: self.count,
            cmd_min: self.min,
            cmd_max: self.max,
        }
    }
}

/// Bounds that keep every derived time far from overflowing.
pub(crate) const MAX_COMMANDS: u64 = 1_000_000;
pub(crate) const HOUR_MS: u64 = 3_600_000;

/// A positive value of `field`, at most `max`, or `default` when absent.
pub(crate) fn bounded(
    ctx: &Ctx,
    field: &str,
    v: &Option<Spanned<u64>>,
    default: u64,
    max: u64,
) -> Result<u64, ScenarioError> {
    let Some(v) = v else { return Ok(default) };
    let n = positive(ctx, field, v)?;
    if n > max {
        return Err(ctx.err(v.span(), format!("field `{field}`: at most {max}")));
    }
    Ok(n)
}

/// A stage's commands: `n` of them, each in the `[min, max]` microseconds of `range`
/// (`default` when absent).
pub(crate) fn commands(
    ctx: &Ctx,
    field: &str,
    n: u64,
    range: &Option<Spanned<[u64; 2]>>,
    default: [u64; 2],
) -> Result<Commands, ScenarioError> {
    let [lo, hi] = range.as_ref().map_or(default, |r| *r.get_ref());
    if lo == 0 || lo > hi || hi > HOUR_MS * 1000 {
        let span = range.as_ref().map(Spanned::span).unwrap_or_default();
        return Err(ctx.err(
            span,
            format!("field `{field}`: [min, max] microseconds with 0 < min <= max <= 1 hour"),
        ));
    }
    Ok(Commands {
        count: u32::try_from(n).unwrap_or(u32::MAX),
        min: Nanos::from_us(lo),
        max: Nanos::from_us(hi),
    })
}

/// A number in `(0, max]`, or `default` when absent.
pub(crate) fn fraction(
    ctx: &Ctx,
    field: &str,
    v: &Option<Spanned<f64>>,
    default: f64,
    max: f64,
) -> Result<f64, ScenarioError> {
    match v {
        None => Ok(default),
        Some(x) if x.get_ref().is_finite() && *x.get_ref() > 0.0 && *x.get_ref() <= max => {
            Ok(*x.get_ref())
        }
        Some(x) => Err(ctx.err(x.span(), format!("field `{field}`: must be in (0, {max}]"))),
    }
}
