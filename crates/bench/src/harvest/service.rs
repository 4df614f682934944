//! The HP service of the harvesting benchmark on real threads: each request's pre-processing,
//! kernels (each waited for), gaps and post-processing, against the wall clock. What it does is
//! reported to an [`Observer`] as it happens (the cooperative rows feed the core's collector
//! from it; under a scheduling policy nobody listens: the policy sees the queue).

use super::on_tile::{OnTile, TileFn};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuQueue, Kernel};
use xsched_core::Nanos;
use xsched_runtime::XQueue;
use xsched_workload::service::HpRequest;

/// Hears what the HP service does, when it does it.
pub(crate) trait Observer: Sync {
    /// A request arrived with these kernels.
    fn arrive(&self, _at: Instant, _kernels: &[Nanos]) {}
    /// Its next kernel is submitted.
    fn kernel_queued(&self, _at: Instant) {}
    /// That kernel completed.
    fn kernel_done(&self, _at: Instant) {}
    /// The request completed (post-processing done).
    fn finish(&self, _at: Instant) {}
}

/// Nobody listens.
pub(crate) struct Unobserved;

impl Observer for Unobserved {}

/// What the HP service measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct HpMeasured {
    /// Each measured request's latency, from its scheduled arrival.
    pub(crate) latencies: Vec<Duration>,
    /// Kernel time of the measured requests.
    pub(crate) kernel_time: Duration,
    /// Per kernel, how much longer than its length it took from submit to completion.
    pub(crate) kernel_waits: Vec<Duration>,
    /// The measured window: from the first measured arrival to the last completion.
    pub(crate) from: Option<Instant>,
    pub(crate) until: Option<Instant>,
}

pub(crate) fn dur(n: Nanos) -> Duration {
    Duration::from_nanos(n.0)
}

/// Wait until `until` by sleeping (a short CPU gap becomes the OS's wake-up time, tens of µs
/// longer: spinning instead would take the second of this machine's two cores from the
/// device's launcher threads).
fn pause_until(until: Instant) {
    let far = until.saturating_duration_since(Instant::now());
    if !far.is_zero() {
        std::thread::sleep(far);
    }
}

/// How the HP service waits for each of its kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelWait {
    /// Blocked until the completion wakes it.
    Block,
    /// Spinning on the command's state, as CUDA's default synchronization does while the
    /// machine has a core to spare; the caller keeps the thread off the device's core
    /// ([`HostCore`]). A blocked waiter costs a wake-up per kernel, and waking an idle core is
    /// slow on a small VM, which only the device's own core is spared while it sleeps: with LP
    /// running there, every HP kernel paid it.
    Spin,
}

/// The calling thread kept off one core (the device's) until dropped, as an accelerator's
/// host threads never share a core with its kernels.
pub(crate) struct HostCore {
    before: nix::sched::CpuSet,
}

impl HostCore {
    /// Off `core`, if the thread may run elsewhere; `None` leaves it as it is.
    pub(crate) fn off(core: usize) -> Option<HostCore> {
        let me = nix::unistd::Pid::from_raw(0);
        let before = nix::sched::sched_getaffinity(me).ok()?;
        let mut host = before;
        host.unset(core).ok()?;
        let elsewhere = (0..nix::sched::CpuSet::count()).any(|c| host.is_set(c).unwrap_or(false));
        (elsewhere && nix::sched::sched_setaffinity(me, &host).is_ok())
            .then_some(HostCore { before })
    }
}

impl Drop for HostCore {
    fn drop(&mut self) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.before);
    }
}

/// Run every request (the first `warmup` unmeasured) starting at `start`, waiting for each
/// kernel as `wait` says. With `end`, each kernel's end is reported by the device (`end` runs
/// after each of its tiles on the worker that ran it, and must tell the observer at the last)
/// instead of by this thread after its wait.
pub(crate) fn serve(
    hp: &XQueue<CpuQueue>,
    reqs: &[HpRequest],
    warmup: u32,
    start: Instant,
    observer: &dyn Observer,
    end: Option<&TileFn>,
    wait: KernelWait,
) -> HpMeasured {
    let mut m = HpMeasured::default();
    for (i, r) in reqs.iter().enumerate() {
        let measured = i >= warmup as usize;
        let arrival = start + dur(r.arrival);
        pause_until(arrival);
        if measured && m.from.is_none() {
            m.from = Some(arrival);
        }
        observer.arrive(arrival, &r.kernels);
        pause_until(arrival + dur(r.pre));
        for (k, &len) in r.kernels.iter().enumerate() {
            observer.kernel_queued(Instant::now());
            let spin = Spin::new(dur(len));
            let kernel: Arc<dyn Kernel> = match end {
                Some(end) => Arc::new(OnTile::new(spin, end.clone())),
                None => Arc::new(spin),
            };
            let submitted = Instant::now();
            if let Ok(h) = hp.submit(CpuCommand::Kernel(kernel)) {
                while wait == KernelWait::Spin && !h.is_done() {
                    std::hint::spin_loop();
                }
                let _ = h.wait();
            }
            let finished = Instant::now();
            if end.is_none() {
                observer.kernel_done(finished);
            }
            if measured {
                m.kernel_time += dur(len);
                m.kernel_waits
                    .push((finished - submitted).saturating_sub(dur(len)));
            }
            let gap = r.gaps.get(k).copied().unwrap_or(r.post);
            pause_until(finished + dur(gap));
        }
        let done = Instant::now();
        observer.finish(done);
        if measured {
            m.latencies.push(done - arrival);
        }
    }
    m.until = Some(Instant::now());
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;

    fn cores(set: &CpuSet) -> Vec<usize> {
        (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect()
    }

    #[test]
    fn a_host_thread_keeps_off_the_device_core_until_dropped() {
        std::thread::spawn(|| {
            let me = Pid::from_raw(0);
            let before = cores(&sched_getaffinity(me).expect("affinity"));
            let others: Vec<usize> = before.iter().copied().filter(|&c| c != 0).collect();
            let host = HostCore::off(0);
            let during = cores(&sched_getaffinity(me).expect("affinity"));
            if others.is_empty() {
                assert!(host.is_none(), "nowhere else to run: left as it was");
                assert_eq!(during, before);
            } else {
                assert!(host.is_some());
                assert_eq!(during, others, "every allowed core but the device's");
            }
            drop(host);
            assert_eq!(cores(&sched_getaffinity(me).expect("affinity")), before);
        })
        .join()
        .expect("the test thread");
    }
}
