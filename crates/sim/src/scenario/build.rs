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
