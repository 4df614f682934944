//! Hummingbird's harvesting on the real CPU device: an HP inference service whose requests are
//! kernels separated by CPU work (`xsched_workload::service`, the simulator's service), beside
//! an endless LP job. Three ways to run it, each against its own HP-alone reference (the SLO is
//! that reference's P99 latency, Hummingbird's definition):
//!
//! - `collector` rows: the LP job is cooperative, as Hummingbird's LP slices are: it asks the
//!   core's collector ([`xsched_core::harvest::Collector`], the machine the simulator's harvest
//!   model drives) what to run (`cooperative.rs`); under `slo-aware` its queue is gated on the
//!   device's worker, so LP slices end at a checkpoint rather than at a completion somebody
//!   observes, and an HP kernel stops LP work it finds at the next one (`gated.rs`). The HP
//!   service spins for its kernels off the device's core in these rows (`KernelWait::Spin`).
//!   Policies: `standalone`, `timeslice` (HP and LP on two devices pinned
//!   to one core: the OS time-slices them, the CPU's native sharing), `priority` (LP slices only
//!   while no HP request is in flight; Hummingbird's temporal-sharing baseline, request
//!   arrivals known), HP alone again (the noise floor of the attainment target) and `slo-aware`
//!   (the collector's grants) per slice length.
//! - `policy` rows: an ordinary LP job and the HP service on two XQueues scheduled in process
//!   by `XSCHED_POLICY` (`scheduled.rs`): `hpf` (XSched's fixed priority), the `slo-aware`
//!   policy, and its `slo-aware:between-requests` baseline. The policy sees only the queues.
//! - `daemon` rows (`run_processes`, `xsched bench harvest-daemon`): the same policies with the
//!   HP service and the LP job as two processes under `xsched serve` (`processes.rs`).
//!
//! `spatial` and `reset` have no CPU-device counterpart (one core cannot run two kernels at
//! once, and the device's Level 3 keeps progress instead of discarding it); the simulator
//! reports them.

mod cooperative;
mod gated;
mod on_tile;
mod params;
mod processes;
mod scheduled;
mod service;

pub use params::HarvestParams;
use params::{AGAIN, Measured, requests};
pub(crate) use processes::report_of;
pub use processes::{ProcessError, hp_service_process, lp_process};
use service::KernelWait;

use crate::stats::none;
use crate::{Check, Report};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::DEFAULT_CHECKPOINT;
use xsched_backend_cpu::{CpuDevice, CpuQueue};
use xsched_core::harvest::{Collector, CollectorConfig, CollectorOptions};
use xsched_core::{Nanos, PolicySpec};
use xsched_report::{Verdict, cells, columns, quantile, round3};
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError, XQueue};
use xsched_workload::service::HpRequest;

/// The cooperative rows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cooperative {
    Standalone,
    /// HP alone once more, run just before the `slo-aware` rows: how far a run of the very
    /// same thing strays from the SLO in that minute (the noise floor of "within 0.01").
    Again,
    Timeslice,
    Priority(Duration),
    SloAware(Duration),
}

impl Cooperative {
    fn name(self) -> &'static str {
        match self {
            Cooperative::Standalone => "standalone",
            Cooperative::Again => AGAIN,
            Cooperative::Timeslice => "timeslice",
            Cooperative::Priority(_) => "priority",
            Cooperative::SloAware(_) => "slo-aware",
        }
    }

    fn slice(self) -> Option<Duration> {
        match self {
            Cooperative::Priority(s) | Cooperative::SloAware(s) => Some(s),
            _ => None,
        }
    }
}

/// The policies the `policy` and `daemon` rows run, after HP alone twice.
const POLICIES: [&str; 3] = ["hpf", "slo-aware:between-requests", "slo-aware"];

/// The SLO the HP queue is given under `slo-aware`: the request latency target less the most
/// pre-processing, which happens before a request's first kernel where no scheduler can see it.
fn slo_hint(p: &HarvestParams, alone: &Measured) -> Duration {
    alone
        .p99()
        .saturating_sub(Duration::from_nanos(p.shape.pre.hi.0))
}

/// HP alone, natively, in this process: the cooperative rows' reference.
fn alone_in_process(p: &HarvestParams, reqs: &[HpRequest]) -> Result<Measured, RuntimeError> {
    run_cooperative(
        p,
        Cooperative::Standalone,
        reqs,
        Duration::MAX,
        Duration::ZERO,
    )
}

/// What an HP kernel took beyond its length, at the median, when HP ran alone.
fn kernel_overhead(alone: &Measured) -> Duration {
    quantile(&alone.hp.kernel_waits, 0.5).unwrap_or(Duration::ZERO)
}

/// One cooperative row: the HP service on a device pinned to `DEVICE_CORE` beside `row`'s LP
/// job, under a collector given `slo` and HP kernels' `overhead`.
fn run_cooperative(
    p: &HarvestParams,
    row: Cooperative,
    reqs: &[HpRequest],
    slo: Duration,
    overhead: Duration,
) -> Result<Measured, RuntimeError> {
    // One worker pinned to core 0 is the device; under `timeslice` LP gets a second device on
    // the same core, so the OS scheduler time-slices the two.
    let device = CpuDevice::pinned(1, DEVICE_CORE)?;
    let lp_device = match row {
        Cooperative::Timeslice => Some(CpuDevice::pinned(1, DEVICE_CORE)?),
        _ => None,
    };
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let hp = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::native())?;
    let lp_hw = lp_device.as_ref().unwrap_or(&device).create_queue();
    // Level 3, so an HP kernel can kill (interrupt) LP work; nobody else suspends it.
    let lp_options = QueueOptions {
        level: Some(xsched_core::Level::Interrupt),
        ..QueueOptions::native()
    };
    let lp = Arc::new(runtime.create_queue(Arc::new(lp_hw), lp_options)?);
    let start = Instant::now() + Duration::from_millis(20);
    let shared = Arc::new(cooperative::SharedCollector::new(
        collector_for(p, row, slo),
        start,
        lp.clone(),
        overhead,
        matches!(row, Cooperative::SloAware(_)),
    ));
    let (hp_m, lp_done) = serve_beside_lp(p, row, reqs, &hp, &lp, &shared, start);
    Ok(Measured::of(hp_m, &lp_done))
}

/// The collector `row` runs under: the SLO `slo`, and the LP launch overhead, slice and tile
/// of its LP job.
fn collector_for(p: &HarvestParams, row: Cooperative, slo: Duration) -> Collector {
    let ns = |d: Duration| Nanos(d.as_nanos() as u64);
    let slice = row.slice().unwrap_or(p.lp_kernel);
    // Under the collector, LP is released on the device's worker (`gated.rs`) and stops at a
    // kernel checkpoint; the `priority` baseline launches each slice from its thread.
    let (overhead_of_lp, tile) = match row {
        Cooperative::SloAware(_) => (p.release_overhead, DEFAULT_CHECKPOINT),
        _ => (p.launch_overhead, p.launch_overhead),
    };
    let cfg = CollectorConfig {
        slo: ns(slo),
        margin: ns(p.margin),
        launch_overhead: ns(overhead_of_lp),
        slice: ns(slice),
        tile: ns(tile),
    };
    // Under the collector, LP stops at the next checkpoint when asked and each release's end is
    // decided again on the device (`gated.rs`): an overrun is priced at one checkpoint.
    match row {
        Cooperative::SloAware(_) => {
            Collector::with_options(cfg, CollectorOptions { checkpointed: true })
        }
        _ => Collector::new(cfg),
    }
}

/// The HP service on `hp` from `start`, beside `row`'s LP job on `lp` (a thread of its own;
/// none for HP alone): what HP measured, and the LP work done.
fn serve_beside_lp(
    p: &HarvestParams,
    row: Cooperative,
    reqs: &[HpRequest],
    hp: &XQueue<CpuQueue>,
    lp: &XQueue<CpuQueue>,
    shared: &Arc<cooperative::SharedCollector>,
    start: Instant,
) -> (service::HpMeasured, Vec<(Instant, Duration)>) {
    let slice = row.slice().unwrap_or(p.lp_kernel);
    // Under the collector an HP kernel's end is heard on the device (`gated.rs`).
    let end = matches!(row, Cooperative::SloAware(_)).then(|| {
        let shared = shared.clone();
        Arc::new(move |last| {
            if last {
                shared.hp_kernel_end();
            }
        }) as on_tile::TileFn
    });
    std::thread::scope(|s| {
        let lp_thread = match row {
            Cooperative::Standalone | Cooperative::Again => None,
            Cooperative::Timeslice => Some(s.spawn(|| timeslice_lp(lp, p.lp_kernel, shared))),
            Cooperative::Priority(_) => Some(s.spawn(|| cooperative::run_between(shared, slice))),
            Cooperative::SloAware(_) => Some(s.spawn(|| gated::run_gated(shared))),
        };
        // The host side of the HP service spins for its kernels off the device's core (every
        // collector row alike, standalone included).
        let host = service::HostCore::off(DEVICE_CORE);
        let wait = match host {
            Some(_) => KernelWait::Spin,
            None => KernelWait::Block,
        };
        let m = service::serve(hp, reqs, p.warmup, start, &**shared, end.as_ref(), wait);
        drop(host);
        shared.finish_service();
        let lp_done = match lp_thread.map(|t| t.join()) {
            None => Vec::new(),
            Some(Ok(done)) => done,
            // A broken benchmark must not report "no LP work".
            Some(Err(panic)) => std::panic::resume_unwind(panic),
        };
        (m, lp_done)
    })
}

/// The core the collector rows' device worker is pinned to.
const DEVICE_CORE: usize = 0;

/// `timeslice`: whole LP kernels back to back on the second device until HP is done.
fn timeslice_lp(
    lp: &XQueue<CpuQueue>,
    kernel: Duration,
    shared: &cooperative::SharedCollector,
) -> Vec<(Instant, Duration)> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            shared.wait_until_done();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        scheduled::lp_job(lp, kernel, &stop)
    })
}

/// Run every row; rows `{device, driver, policy, slice_us, hp_slo_attainment,
/// lp_throughput_norm, utilization, preempt_p99_us}` (the last: P99 of how much longer than its
/// length an HP kernel took, from submit to observed completion).
pub fn run(p: &HarvestParams, progress: &dyn Fn(usize, usize)) -> Result<Report, RuntimeError> {
    let reqs = requests(p);
    let mut rows = vec![Cooperative::Standalone, Cooperative::Timeslice];
    if let Some(&first) = p.slices.first() {
        rows.push(Cooperative::Priority(first));
    }
    rows.push(Cooperative::Again);
    rows.extend(p.slices.iter().map(|&s| Cooperative::SloAware(s)));
    let policy_rows = if p.policies { POLICIES.len() + 2 } else { 0 };
    let total = rows.len() + policy_rows;
    progress(0, total);
    let alone = alone_in_process(p, &reqs)?;
    let (slo, overhead) = (alone.p99(), kernel_overhead(&alone));
    let mut coop = vec![(Cooperative::Standalone, alone)];
    for (i, &row) in rows.iter().enumerate().skip(1) {
        progress(i, total);
        coop.push((row, run_cooperative(p, row, &reqs, slo, overhead)?));
    }
    let mut policies = Vec::new();
    if p.policies {
        let lp_kernel = p.slices.first().copied();
        let hpf = PolicySpec::registered("hpf");
        let (hp, lp) = scheduled::run(&hpf, &reqs, p.warmup, Duration::ZERO, None)?;
        let alone = Measured::of(hp, &lp);
        let hint = slo_hint(p, &alone);
        policies.push(("standalone", alone));
        progress(rows.len() + 1, total);
        let (hp, lp) = scheduled::run(&hpf, &reqs, p.warmup, Duration::ZERO, None)?;
        policies.push((AGAIN, Measured::of(hp, &lp)));
        for (i, policy) in POLICIES.iter().enumerate() {
            progress(rows.len() + 2 + i, total);
            let spec = PolicySpec::registered(policy);
            let (hp, lp) = scheduled::run(&spec, &reqs, p.warmup, hint, lp_kernel)?;
            policies.push((*policy, Measured::of(hp, &lp)));
        }
    }
    progress(total, total);
    Ok(report(p, &coop, &policies, &[]))
}

/// The `daemon` rows: HP and LP as two processes of `exe` (the `xsched` binary) under a daemon.
pub fn run_processes(
    exe: &Path,
    p: &HarvestParams,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, ProcessError> {
    let reqs = requests(p);
    // The cooperative `priority` row is the baseline of the LP target; it runs in process.
    let alone = alone_in_process(p, &reqs)?;
    let slice = p
        .slices
        .first()
        .copied()
        .unwrap_or(Duration::from_micros(200));
    let overhead = kernel_overhead(&alone);
    let prio = run_cooperative(
        p,
        Cooperative::Priority(slice),
        &reqs,
        alone.p99(),
        overhead,
    )?;
    let daemon = processes::run(exe, p, &POLICIES, |m| slo_hint(p, m), progress)?;
    Ok(report(
        p,
        &[
            (Cooperative::Standalone, alone),
            (Cooperative::Priority(slice), prio),
        ],
        &[],
        &daemon,
    ))
}

fn row_of(
    driver: &str,
    policy: &str,
    slice: Option<Duration>,
    m: &Measured,
    slo: Duration,
) -> xsched_report::Row {
    cells(&[
        ("device", json!("cpu")),
        ("driver", json!(driver)),
        ("policy", json!(policy)),
        (
            "slice_us",
            slice.map_or(none(), |s| json!(round3(s.as_secs_f64() * 1e6))),
        ),
        ("hp_slo_attainment", json!(round3(m.attainment(slo)))),
        ("lp_throughput_norm", json!(round3(m.lp_norm()))),
        ("utilization", json!(round3(m.utilization()))),
        (
            "preempt_p99_us",
            json!(quantile(&m.hp.kernel_waits, 0.99).map(|d| round3(d.as_secs_f64() * 1e6))),
        ),
    ])
}

/// The targets for one driver's slo-aware row: attainment within 0.01 of HP alone, LP
/// at least twice the `priority` baseline's.
fn targets(
    what: &str,
    m: &Measured,
    alone: &Measured,
    again: Option<&Measured>,
    slo: Duration,
    prio: Option<&Measured>,
) -> Vec<Check> {
    let (a, a0) = (m.attainment(slo), alone.attainment(slo));
    let floor = again.map_or(String::new(), |g| {
        format!("; HP alone again: {:.3}", g.attainment(slo))
    });
    let mut checks = vec![Check {
        name: format!("cpu {what} attainment vs standalone"),
        target: "within 0.01".into(),
        measured: format!(
            "{a:.3} vs {a0:.3} (SLO {:.0} us{floor})",
            slo.as_secs_f64() * 1e6
        ),
        verdict: Verdict::of(a >= a0 - 0.01),
    }];
    if let Some(prio) = prio {
        let (lp, lp0) = (m.lp_norm(), prio.lp_norm());
        checks.push(Check {
            name: format!("cpu {what} LP vs priority"),
            target: ">= 2x priority".into(),
            measured: format!("{lp:.3} vs {lp0:.3} ({:.2}x)", lp / lp0.max(1e-9)),
            verdict: Verdict::of(lp >= 2.0 * lp0),
        });
    }
    checks
}

/// The report: the collector rows and checks, then the `policy` and `daemon` drivers'.
fn report(
    p: &HarvestParams,
    coop: &[(Cooperative, Measured)],
    policies: &[(&str, Measured)],
    daemon: &[(&str, Measured)],
) -> Report {
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let prio = coop_row(coop, "priority");
    collector_part(p, coop, prio, &mut rows, &mut checks);
    let lp_kernel = p.slices.first().copied();
    for (driver, list) in [("policy", policies), ("daemon", daemon)] {
        driver_part(driver, list, lp_kernel, prio, &mut rows, &mut checks);
    }
    Report {
        experiment: "harvest (cpu device)".into(),
        columns: columns(&[
            "device",
            "driver",
            "policy",
            "slice_us",
            "hp_slo_attainment",
            "lp_throughput_norm",
            "utilization",
            "preempt_p99_us",
        ]),
        rows,
        checks,
        events: None,
    }
}

/// The measurement of the cooperative row named `name`, if it ran.
fn coop_row<'a>(coop: &'a [(Cooperative, Measured)], name: &str) -> Option<&'a Measured> {
    coop.iter().find(|(r, _)| r.name() == name).map(|(_, m)| m)
}

/// The collector rows, then each `slo-aware` row's targets and its LP against `timeslice`'s
/// (nothing without a `standalone` row, the SLO's reference).
fn collector_part(
    p: &HarvestParams,
    coop: &[(Cooperative, Measured)],
    prio: Option<&Measured>,
    rows: &mut Vec<xsched_report::Row>,
    checks: &mut Vec<Check>,
) {
    let again = coop_row(coop, AGAIN);
    let Some(alone) = coop_row(coop, "standalone") else {
        return;
    };
    let slo = alone.p99();
    for (r, m) in coop {
        let shown = match r {
            Cooperative::Timeslice => Some(p.lp_kernel),
            _ => r.slice(),
        };
        rows.push(row_of("collector", r.name(), shown, m, slo));
    }
    for (r, m) in coop
        .iter()
        .filter(|(r, _)| matches!(r, Cooperative::SloAware(_)))
    {
        let us = r.slice().map_or(0, |s| s.as_micros());
        checks.extend(targets(
            &format!("collector slo-aware ({us} us)"),
            m,
            alone,
            again,
            slo,
            prio,
        ));
        if let Some(ts) = coop_row(coop, "timeslice") {
            checks.push(Check {
                name: format!("cpu collector slo-aware ({us} us) LP vs timeslice"),
                target: "above".into(),
                measured: format!(
                    "{:.3} vs {:.3} (timeslice attainment {:.3})",
                    m.lp_norm(),
                    ts.lp_norm(),
                    ts.attainment(slo)
                ),
                verdict: Verdict::of(m.lp_norm() > ts.lp_norm()),
            });
        }
    }
}

/// One driver's rows (`policy` or `daemon`), then its `slo-aware` row's targets and, reported,
/// its figures beside `hpf`'s and `slo-aware:between-requests`' (nothing without a
/// `standalone` row).
fn driver_part(
    driver: &str,
    list: &[(&str, Measured)],
    lp_kernel: Option<Duration>,
    prio: Option<&Measured>,
    rows: &mut Vec<xsched_report::Row>,
    checks: &mut Vec<Check>,
) {
    let Some((_, alone)) = list.iter().find(|(n, _)| *n == "standalone") else {
        return;
    };
    let slo = alone.p99();
    for (name, m) in list {
        let slice = POLICIES.contains(name).then_some(lp_kernel).flatten();
        rows.push(row_of(driver, name, slice, m, slo));
    }
    let Some((_, m)) = list.iter().find(|(n, _)| *n == "slo-aware") else {
        return;
    };
    let again = list.iter().find(|(n, _)| *n == AGAIN).map(|(_, m)| m);
    checks.extend(targets(
        &format!("{driver} slo-aware"),
        m,
        alone,
        again,
        slo,
        prio,
    ));
    for other in ["hpf", "slo-aware:between-requests"] {
        if let Some((_, o)) = list.iter().find(|(n, _)| *n == other) {
            checks.push(Check {
                name: format!("cpu {driver} slo-aware vs {other}"),
                target: "none".into(),
                measured: format!(
                    "attainment {:.3} vs {:.3}, LP {:.3} vs {:.3}",
                    m.attainment(slo),
                    o.attainment(slo),
                    m.lp_norm(),
                    o.lp_norm()
                ),
                verdict: Verdict::Reported,
            });
        }
    }
}
