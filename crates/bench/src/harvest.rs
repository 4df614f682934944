//! Hummingbird's harvesting on the real CPU device (the simulator's model is
//! `xsched_sim::harvest`): an HP inference service whose requests are kernels separated by CPU
//! work, beside an endless LP job issued as slices (`Spin` kernels of the slice length).
//!
//! Rows: `standalone` (HP alone), `timeslice` (HP and LP on two devices pinned to one core: the
//! OS time-slices them, the CPU's native sharing), `priority` (LP slices only while no HP
//! request is in flight), `slo-aware` (LP slices only into predicted idle windows: the 10th
//! percentile of the gaps learned at the request's current position, or for an idle service
//! the learned time to the next arrival plus pre-processing). `spatial` and `reset` have no
//! CPU-device counterpart (one core cannot run two kernels at once, and the device's Level 3
//! keeps progress instead of discarding it); the simulator reports them. Unlike the
//! simulator's, this collector never lets a slice overrun a window on slack, and never kills.

use crate::stats::none;
use crate::{Check, Report};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::Nanos;
use xsched_core::harvest::GapLearner;
use xsched_report::quantile;
use xsched_report::{cells, columns, round3};
use xsched_runtime::{CommandHandle, QueueOptions, Runtime, RuntimeConfig, RuntimeError, XQueue};
use xsched_workload::service::{HpRequest, HpShape, Span};

/// What the benchmark runs.
#[derive(Clone, Debug)]
pub struct HarvestParams {
    /// The HP service (requests, kernels, gaps, pre/post-processing, device share).
    pub shape: HpShape,
    /// LP slice lengths for `slo-aware` (the first also for `priority`).
    pub slices: Vec<Duration>,
    /// LP kernel length under `timeslice` (whole kernels, not sliced).
    pub lp_kernel: Duration,
    /// A window must exceed the slice by this much (the slice's launch and wake-up cost).
    pub margin: Duration,
    /// Requests run first and not measured.
    pub warmup: u32,
    /// Seed of the HP requests.
    pub seed: u64,
}

impl Default for HarvestParams {
    /// About 30 s: 400 inference requests (8 × 0.7–0.9 ms kernels, 20–60 µs gaps, 2–4 ms
    /// pre-processing, 0.2–0.5 ms post-processing, periodic, HP using half the device), as in
    /// `scenarios/hummingbird-inference.toml`; LP slices of 200 µs and 500 µs.
    fn default() -> Self {
        HarvestParams {
            shape: HpShape {
                kernels: 8,
                kernel: Span::us(700, 900),
                gap: Span::us(20, 60),
                pre: Span::us(2000, 4000),
                post: Span::us(200, 500),
                device_share: 0.5,
                poisson: false,
                requests: 400,
            },
            slices: vec![Duration::from_micros(200), Duration::from_micros(500)],
            lp_kernel: Duration::from_millis(5),
            margin: Duration::from_micros(50),
            warmup: 20,
            seed: 1,
        }
    }
}

/// How LP shares the device.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    Standalone,
    Timeslice,
    Priority(Duration),
    SloAware(Duration),
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Standalone => "standalone",
            Policy::Timeslice => "timeslice",
            Policy::Priority(_) => "priority",
            Policy::SloAware(_) => "slo-aware",
        }
    }
}

/// Where the HP service is, as the collector sees it.
#[derive(Debug, Default)]
struct Service {
    /// The request in flight: its CPU phase's start and position (`None`: a kernel is on the
    /// device), or nothing in flight.
    phase: Option<Option<(Instant, usize)>>,
    last_arrival: Option<Instant>,
    gaps: Vec<GapLearner>,
    interarrival: GapLearner,
    done: bool,
}

/// The HP service's state shared with the LP thread.
struct Shared {
    service: Mutex<Service>,
    changed: Condvar,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut Service)) {
        let mut s = self.service.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut s);
        self.changed.notify_all();
    }

    /// Whether LP work of `len` (+ `margin`) may start now under `policy`.
    fn admits(s: &Service, policy: Policy, len: Duration, margin: Duration) -> bool {
        match policy {
            Policy::Standalone => false,
            Policy::Timeslice => true,
            Policy::Priority(_) => s.phase.is_none(),
            Policy::SloAware(_) => Shared::window(s) >= len + margin,
        }
    }

    /// The predicted idle window from now (`slo-aware`): zero while an HP kernel is on the
    /// device; in a CPU phase, the 10th percentile of the gaps learned at that position less
    /// the time already spent; with no request in flight, the learned time to the next
    /// arrival plus its pre-processing.
    fn window(s: &Service) -> Duration {
        let now = Instant::now();
        let learned = |pos: usize| {
            Duration::from_nanos(s.gaps.get(pos).map_or(Nanos::ZERO, GapLearner::predict).0)
        };
        match s.phase {
            Some(None) => Duration::ZERO,
            Some(Some((since, pos))) => learned(pos).saturating_sub(now - since),
            None => {
                let next = s.last_arrival.map_or(Duration::ZERO, |a| {
                    Duration::from_nanos(s.interarrival.predict().0).saturating_sub(now - a)
                });
                next + learned(0)
            }
        }
    }

    /// The LP work to issue now beside `queued` work already issued: a slice (or whole
    /// kernel) where the policy admits one; for `slo-aware`, as many slices as the window
    /// holds, merged into one launch, up to [`MERGE_SLICES`].
    fn next_work(
        s: &Service,
        policy: Policy,
        slice: Duration,
        queued: Duration,
        margin: Duration,
    ) -> Option<Duration> {
        if let Policy::SloAware(_) = policy {
            let room = Shared::window(s).saturating_sub(queued + margin);
            let slices = (room.as_nanos() / slice.as_nanos().max(1)).min(MERGE_SLICES);
            return (slices > 0).then(|| slice * slices as u32);
        }
        Shared::admits(s, policy, queued + slice, margin).then_some(slice)
    }
}

/// The most slices one `slo-aware` launch merges (a long window takes fewer, longer launches:
/// each costs the CPU device a few wake-ups).
const MERGE_SLICES: u128 = 8;

/// What one policy measured.
struct Measured {
    latencies: Vec<Duration>,
    hp_kernel_time: Duration,
    kernel_waits: Vec<Duration>,
    lp_work: Duration,
    /// The measured window: from the first measured arrival, for `window`.
    from: Instant,
    window: Duration,
}

fn dur(n: Nanos) -> Duration {
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

/// The HP service: every request's pre-processing, kernels (each waited for), gaps and
/// post-processing, reported to the collector as it goes.
fn serve(hp: &XQueue<CpuQueue>, reqs: &[HpRequest], shared: &Shared, warmup: u32) -> Measured {
    let start = Instant::now() + Duration::from_millis(20);
    let mut m = Measured {
        latencies: Vec::new(),
        hp_kernel_time: Duration::ZERO,
        kernel_waits: Vec::new(),
        lp_work: Duration::ZERO,
        from: start,
        window: Duration::ZERO,
    };
    for (i, r) in reqs.iter().enumerate() {
        let arrival = start + dur(r.arrival);
        pause_until(arrival);
        if i == warmup as usize {
            m.from = arrival;
        }
        shared.update(|s| {
            if let Some(last) = s.last_arrival.replace(arrival) {
                s.interarrival
                    .observe(Nanos((arrival - last).as_nanos() as u64));
            }
            s.phase = Some(Some((arrival, 0)));
        });
        let mut phase_start = arrival;
        pause_until(arrival + dur(r.pre));
        for (k, &len) in r.kernels.iter().enumerate() {
            let now = Instant::now();
            shared.update(|s| {
                if s.gaps.len() <= k {
                    s.gaps.resize_with(k + 1, GapLearner::default);
                }
                s.gaps[k].observe(Nanos((now - phase_start).as_nanos() as u64));
                s.phase = Some(None);
            });
            let kernel = Arc::new(Spin::new(dur(len)));
            let submitted = Instant::now();
            if let Ok(h) = hp.submit(CpuCommand::Kernel(kernel)) {
                let _ = h.wait();
            }
            let finished = Instant::now();
            if i >= warmup as usize {
                m.hp_kernel_time += dur(len);
                m.kernel_waits
                    .push((finished - submitted).saturating_sub(dur(len)));
            }
            phase_start = finished;
            let gap = r.gaps.get(k).copied().unwrap_or(r.post);
            shared.update(|s| s.phase = Some(Some((finished, k + 1))));
            pause_until(finished + dur(gap));
        }
        let post = r.kernels.len();
        shared.update(|s| {
            if s.gaps.len() <= post {
                s.gaps.resize_with(post + 1, GapLearner::default);
            }
            s.gaps[post].observe(Nanos((Instant::now() - phase_start).as_nanos() as u64));
            s.phase = None;
        });
        if i >= warmup as usize {
            m.latencies.push(Instant::now() - arrival);
        }
    }
    m.window = Instant::now() - m.from;
    shared.update(|s| s.done = true);
    m
}

/// The LP job: slices (or whole kernels) each admitted by the policy, paced so that the
/// device holds at most one queued LP launch behind the running one (the second is admitted
/// only when the window holds both); returns when and how much LP work completed.
fn harvest(
    lp: &XQueue<CpuQueue>,
    policy: Policy,
    p: &HarvestParams,
    shared: &Shared,
) -> Vec<(Instant, Duration)> {
    let len = match policy {
        Policy::Priority(s) | Policy::SloAware(s) => s,
        Policy::Timeslice => p.lp_kernel,
        Policy::Standalone => return Vec::new(),
    };
    let mut done = Vec::new();
    let mut inflight: VecDeque<(CommandHandle, Duration)> = VecDeque::new();
    loop {
        let (work, finished) = {
            let s = shared
                .service
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let queued = inflight.iter().map(|(_, d)| *d).sum();
            let work = if inflight.len() < 2 {
                Shared::next_work(&s, policy, len, queued, p.margin)
            } else {
                None
            };
            (work, s.done)
        };
        if let (Some(work), false) = (work, finished) {
            let kernel = Arc::new(Spin::new(work));
            if let Ok(h) = lp.submit(CpuCommand::Kernel(kernel)) {
                inflight.push_back((h, work));
            }
            continue;
        }
        if let Some((h, work)) = inflight.pop_front() {
            if h.wait().is_ok() {
                done.push((Instant::now(), work));
            }
            continue;
        }
        if finished {
            return done;
        }
        let s = shared
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let _ = shared
            .changed
            .wait_timeout(s, Duration::from_millis(1))
            .unwrap_or_else(PoisonError::into_inner);
    }
}

fn run_policy(
    p: &HarvestParams,
    policy: Policy,
    reqs: &[HpRequest],
) -> Result<Measured, RuntimeError> {
    // One worker pinned to core 0 is the device; under `timeslice` LP gets a second device on
    // the same core, so the OS scheduler time-slices the two.
    let device = CpuDevice::pinned(1, 0)?;
    let lp_device = match policy {
        Policy::Timeslice => Some(CpuDevice::pinned(1, 0)?),
        _ => None,
    };
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let hp = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::native())?;
    let lp_hw = lp_device.as_ref().unwrap_or(&device).create_queue();
    let lp = runtime.create_queue(Arc::new(lp_hw), QueueOptions::native())?;
    let shared = Shared {
        service: Mutex::new(Service::default()),
        changed: Condvar::new(),
    };
    let (mut m, lp_done) = std::thread::scope(|s| {
        let lp_thread = s.spawn(|| harvest(&lp, policy, p, &shared));
        let m = serve(&hp, reqs, &shared, p.warmup);
        (m, lp_thread.join().unwrap_or_default())
    });
    let from = m.from;
    m.lp_work = lp_done
        .iter()
        .filter(|(t, _)| *t >= from)
        .map(|(_, d)| *d)
        .sum();
    Ok(m)
}

/// Run every policy; rows `{device, policy, slice_us, hp_slo_attainment, lp_throughput_norm,
/// utilization, preempt_p99_us}` (the last: P99 of how much longer than its length an HP
/// kernel took, from submit to observed completion).
pub fn run(p: &HarvestParams, progress: &dyn Fn(usize, usize)) -> Result<Report, RuntimeError> {
    let reqs = HpShape {
        requests: p.shape.requests + p.warmup,
        ..p.shape.clone()
    }
    .generate(p.seed);
    let mut policies = vec![Policy::Standalone, Policy::Timeslice];
    if let Some(&first) = p.slices.first() {
        policies.push(Policy::Priority(first));
    }
    policies.extend(p.slices.iter().map(|&s| Policy::SloAware(s)));
    let mut results = Vec::new();
    for (i, &policy) in policies.iter().enumerate() {
        progress(i, policies.len());
        results.push((policy, run_policy(p, policy, &reqs)?));
    }
    progress(policies.len(), policies.len());
    Ok(report(&results))
}

fn report(results: &[(Policy, Measured)]) -> Report {
    let slo = results
        .iter()
        .find(|(p, _)| *p == Policy::Standalone)
        .and_then(|(_, m)| quantile(&m.latencies, 0.99))
        .unwrap_or(Duration::MAX);
    let attainment = |m: &Measured| {
        m.latencies.iter().filter(|l| **l <= slo).count() as f64 / m.latencies.len().max(1) as f64
    };
    let secs = |d: Duration| d.as_secs_f64();
    let lp_norm = |m: &Measured| secs(m.lp_work) / secs(m.window).max(1e-9);
    let util = |m: &Measured| (secs(m.hp_kernel_time) + secs(m.lp_work)) / secs(m.window).max(1e-9);
    let mut rows = Vec::new();
    for (policy, m) in results {
        let slice = match policy {
            Policy::Priority(s) | Policy::SloAware(s) => json!(round3(s.as_secs_f64() * 1e6)),
            _ => none(),
        };
        rows.push(cells(&[
            ("device", json!("cpu")),
            ("policy", json!(policy.name())),
            ("slice_us", slice),
            ("hp_slo_attainment", json!(round3(attainment(m)))),
            ("lp_throughput_norm", json!(round3(lp_norm(m)))),
            ("utilization", json!(round3(util(m)))),
            (
                "preempt_p99_us",
                json!(quantile(&m.kernel_waits, 0.99).map(|d| round3(d.as_secs_f64() * 1e6))),
            ),
        ]));
    }
    let find = |name: &str| {
        results
            .iter()
            .find(|(p, _)| p.name() == name)
            .map(|(_, m)| m)
    };
    let mut checks = Vec::new();
    if let (Some(alone), Some(prio), Some(ts)) =
        (find("standalone"), find("priority"), find("timeslice"))
    {
        for (policy, m) in results
            .iter()
            .filter(|(p, _)| matches!(p, Policy::SloAware(_)))
        {
            let Policy::SloAware(s) = policy else {
                continue;
            };
            let us = s.as_micros();
            checks.push(Check {
                name: format!("cpu slo-aware ({us} us) attainment vs standalone"),
                target: "within 0.01".into(),
                measured: format!("{:.3} vs {:.3}", attainment(m), attainment(alone)),
                pass: attainment(m) >= attainment(alone) - 0.01,
            });
            checks.push(Check {
                name: format!("cpu slo-aware ({us} us) LP vs priority, timeslice"),
                target: ">= 2x priority, above timeslice".into(),
                measured: format!(
                    "{:.3} vs {:.3} ({:.2}x), timeslice {:.3} (attainment {:.3})",
                    lp_norm(m),
                    lp_norm(prio),
                    lp_norm(m) / lp_norm(prio).max(1e-9),
                    lp_norm(ts),
                    attainment(ts)
                ),
                pass: lp_norm(m) >= 2.0 * lp_norm(prio) && lp_norm(m) > lp_norm(ts),
            });
        }
    }
    Report {
        experiment: "harvest (cpu device)".into(),
        columns: columns(&[
            "device",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(us: u64) -> GapLearner {
        let mut g = GapLearner::default();
        g.observe(Nanos::from_us(us));
        g
    }

    const SLICE: Duration = Duration::from_micros(200);
    const MARGIN: Duration = Duration::from_micros(50);

    #[test]
    fn priority_admits_only_an_idle_service() {
        let mut s = Service::default();
        assert!(Shared::admits(&s, Policy::Priority(SLICE), SLICE, MARGIN));
        s.phase = Some(Some((Instant::now(), 1)));
        assert!(!Shared::admits(&s, Policy::Priority(SLICE), SLICE, MARGIN));
    }

    #[test]
    fn slo_aware_admits_what_fits_the_predicted_window() {
        let policy = Policy::SloAware(SLICE);
        let now = Instant::now();
        let mut s = Service {
            gaps: vec![learned(2000), learned(10_000)],
            ..Service::default()
        };
        s.phase = Some(None);
        assert!(
            !Shared::admits(&s, policy, SLICE, MARGIN),
            "a kernel is on the device"
        );
        s.phase = Some(Some((now, 1)));
        assert!(
            Shared::admits(&s, policy, SLICE, MARGIN),
            "a 10 ms gap just began"
        );
        s.phase = Some(Some((now - Duration::from_micros(9_900), 1)));
        assert!(
            !Shared::admits(&s, policy, SLICE, MARGIN),
            "the gap is nearly over"
        );
        s.phase = Some(Some((now, 7)));
        assert!(
            !Shared::admits(&s, policy, SLICE, MARGIN),
            "a gap never seen"
        );
        // Idle service: the next arrival (every 20 ms, the last just now) plus 2 ms of
        // pre-processing leave a long window.
        s.phase = None;
        s.last_arrival = Some(now);
        s.interarrival = learned(20_000);
        assert!(Shared::admits(&s, policy, SLICE, MARGIN));
        s.last_arrival = Some(now - Duration::from_millis(30));
        s.gaps[0] = learned(100);
        assert!(
            !Shared::admits(&s, policy, SLICE, MARGIN),
            "a request is due"
        );
    }
}
