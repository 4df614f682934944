//! An open-loop inference service on a real queue, as the case studies drive it: requests of
//! kernels with seeded random lengths arrive at Poisson times, one thread submits them and
//! another waits for each and records its latency, so a slow request never delays the next
//! arrival. The same seed gives every mode of a study the same requests.

use hdrhistogram::Histogram;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_core::Nanos;
use xsched_runtime::{CommandHandle, XQueue};
use xsched_workload::SeededRng;

/// A service's requests.
#[derive(Clone, Copy, Debug)]
pub struct ServiceLoad {
    /// Kernels per request.
    pub kernels: u32,
    /// Shortest and longest kernel (uniform in between).
    pub kernel: (Duration, Duration),
    /// Mean time between arrivals.
    pub mean_gap: Duration,
    /// Seed of the arrivals and kernel lengths.
    pub seed: u64,
}

impl ServiceLoad {
    /// One request's mean device time.
    pub fn mean_request(&self) -> Duration {
        (self.kernel.0 + self.kernel.1) / 2 * self.kernels
    }
}

/// A duration as core nanoseconds.
pub(crate) fn nanos(d: Duration) -> Nanos {
    Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A length uniform in `[lo, hi]`.
pub(crate) fn length(rng: &mut SeededRng, (lo, hi): (Duration, Duration)) -> Duration {
    Duration::from_nanos(rng.between(nanos(lo), nanos(hi)).0)
}

/// Run the service on `q` from `start` until `end`: the latencies of requests arrived after
/// `from`.
pub fn serve(
    q: &XQueue<CpuQueue>,
    s: &ServiceLoad,
    start: Instant,
    from: Instant,
    end: Instant,
) -> Histogram<u64> {
    let gap = nanos(s.mean_gap);
    let mut rng = SeededRng::new(s.seed);
    let (tx, rx) = crossbeam_channel::unbounded::<(Instant, CommandHandle)>();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(move || {
            let mut latency = xsched_report::new_histogram();
            for (arrival, handle) in rx {
                let _ = handle.wait();
                if arrival >= from {
                    xsched_report::record_duration(&mut latency, arrival.elapsed());
                }
            }
            latency
        });
        let mut arrival = start;
        while arrival < end {
            std::thread::sleep(arrival.saturating_duration_since(Instant::now()));
            let mut last = None;
            for _ in 0..s.kernels {
                let kernel = Arc::new(Spin::new(length(&mut rng, s.kernel)));
                last = q.submit(CpuCommand::Kernel(kernel)).ok();
            }
            // A queue that refuses commands ends the stream (no latencies are made up).
            let Some(h) = last else { break };
            let _ = tx.send((arrival, h));
            arrival += Duration::from_nanos(rng.exponential(gap).0);
        }
        drop(tx);
        match waiter.join() {
            Ok(latency) => latency,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
