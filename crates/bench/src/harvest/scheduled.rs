//! The harvesting benchmark under a real scheduling policy (`XSCHED_POLICY`), in one process:
//! the HP service on one XQueue, an ordinary LP job on another (a stream of `Spin` kernels that
//! knows nothing of HP), both on one CPU device and scheduled by the in-process scheduler.
//! Nobody tells the policy about requests: it sees the queues. The two-process form of the same
//! run, through the daemon, is `processes.rs`.

use super::service::{self, HpMeasured, KernelWait, Unobserved};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Hint, Level, PolicySpec};
use xsched_runtime::{
    CommandHandle, QueueOptions, Runtime, RuntimeConfig, RuntimeError, WhoSchedules, XQueue,
};
use xsched_workload::service::HpRequest;

/// LP kernels the LP job keeps submitted at once.
pub(crate) const LP_WINDOW: usize = 8;

/// How the HP queue is advised under each policy.
pub(crate) fn hp_hint(policy: &PolicySpec, slo_hint: Duration) -> Hint {
    if policy.name() == "slo-aware" {
        Hint::Slo(xsched_core::Nanos(slo_hint.as_nanos() as u64))
    } else {
        Hint::Priority(10)
    }
}

/// The LP job of the policy rows: `kernel`-long `Spin` kernels, at most [`LP_WINDOW`]
/// outstanding, until `stop`; when each completed.
pub(crate) fn lp_job(
    lp: &XQueue<CpuQueue>,
    kernel: Duration,
    stop: &AtomicBool,
) -> Vec<(Instant, Duration)> {
    let spin = Arc::new(Spin::new(kernel));
    let mut outstanding: VecDeque<CommandHandle> = VecDeque::new();
    let mut done = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        while outstanding.len() < LP_WINDOW {
            match lp.submit(CpuCommand::Kernel(spin.clone())) {
                Ok(h) => outstanding.push_back(h),
                Err(_) => return done,
            }
        }
        // Bounded waits: a suspended LP queue holds its kernels, and `stop` must be seen.
        if let Some(h) = outstanding.front()
            && let Some(result) = h.wait_timeout(Duration::from_millis(5))
        {
            outstanding.pop_front();
            if result.is_ok() {
                done.push((Instant::now(), kernel));
            }
        }
    }
    let _ = lp.cancel_pending();
    done
}

/// The HP queue's options under `policy` (Level 3: the CPU device stops LP at its next
/// checkpoint, and HP gets the same level).
pub(crate) fn hp_options(
    policy: &PolicySpec,
    slo_hint: Duration,
) -> Result<QueueOptions, RuntimeError> {
    QueueOptions::default()
        .with_level(Level::Interrupt)
        .with_hint(hp_hint(policy, slo_hint))
}

/// HP alone (`lp_kernel: None`) or beside the LP job, both scheduled by `policy` in process.
pub(crate) fn run(
    policy: &PolicySpec,
    reqs: &[HpRequest],
    warmup: u32,
    slo_hint: Duration,
    lp_kernel: Option<Duration>,
) -> Result<(HpMeasured, Vec<(Instant, Duration)>), RuntimeError> {
    let device = CpuDevice::pinned(1, 0)?;
    let runtime = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::Local,
        policy: policy.clone(),
        ..RuntimeConfig::default()
    })?;
    // The HP queue first: `slo-aware` refuses queues while none has an SLO.
    let hp = runtime.create_queue(
        Arc::new(device.create_queue()),
        hp_options(policy, slo_hint)?,
    )?;
    let lp = runtime.create_queue(
        Arc::new(device.create_queue()),
        QueueOptions::default().with_level(Level::Interrupt),
    )?;
    let stop = AtomicBool::new(false);
    let start = Instant::now() + Duration::from_millis(20);
    Ok(std::thread::scope(|s| {
        let (lp, stop) = (&lp, &stop);
        let lp_thread = lp_kernel.map(|k| s.spawn(move || lp_job(lp, k, stop)));
        let m = service::serve(
            &hp,
            reqs,
            warmup,
            start,
            &Unobserved,
            None,
            KernelWait::Block,
        );
        stop.store(true, Ordering::Relaxed);
        let lp_done = match lp_thread.map(|t| t.join()) {
            None => Vec::new(),
            Some(Ok(done)) => done,
            // A broken benchmark must not report "no LP work".
            Some(Err(panic)) => std::panic::resume_unwind(panic),
        };
        (m, lp_done)
    }))
}
