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
//!
//! What the rows are and what one measured is `params.rs`; their report and the targets
//! are `report.rs`.

mod cooperative;
mod gated;
mod on_tile;
mod params;
mod processes;
mod report;
mod scheduled;
mod service;

pub use params::HarvestParams;
use params::{AGAIN, Cooperative, Measured, POLICIES, requests};
pub(crate) use processes::report_of;
pub use processes::{hp_service_process, lp_process};
use report::report;
use service::KernelWait;

use crate::Report;
use crate::error::BenchError;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::DEFAULT_CHECKPOINT;
use xsched_backend_cpu::{CpuDevice, CpuQueue};
use xsched_core::harvest::{Collector, CollectorConfig, CollectorOptions};
use xsched_core::{Nanos, PolicySpec};
use xsched_report::quantile;
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, RuntimeError, XQueue};
use xsched_workload::service::HpRequest;

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
pub fn run(p: &HarvestParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
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
) -> Result<Report, BenchError> {
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
