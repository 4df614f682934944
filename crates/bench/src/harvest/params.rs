//! What the harvesting benchmark runs and what one of its rows measured: shared by the rows run
//! in this process (`mod.rs`), those run as two processes under the daemon (`processes.rs`) and
//! the report (`report.rs`), each of which imports it rather than the others.

use super::service::HpMeasured;
use std::time::{Duration, Instant};
use xsched_report::quantile;
use xsched_workload::service::{DurationRange, HpRequest, HpShape};

/// What the benchmark runs.
#[derive(Clone, Debug)]
pub struct HarvestParams {
    /// The HP service (requests, kernels, gaps, pre/post-processing, device share).
    pub shape: HpShape,
    /// LP slice lengths for the cooperative `slo-aware` rows (the first also for `priority`
    /// and as the LP job's kernel length under the policies).
    pub slices: Vec<Duration>,
    /// LP kernel length under `timeslice` (whole kernels, not sliced).
    pub lp_kernel: Duration,
    /// Device time an LP launch costs here (the CPU device's thread wake-ups): the `priority`
    /// baseline's.
    pub launch_overhead: Duration,
    /// Device time a release of the collector rows' gated LP queue costs (a resume on the
    /// device's own worker, no wake-up; `gated.rs`): set above the time a traced run shows from
    /// an HP kernel's end to LP running, so a release is never priced below what it costs.
    pub release_overhead: Duration,
    /// Slack the collector keeps in reserve when LP may delay HP.
    pub margin: Duration,
    /// Requests run first and not measured.
    pub warmup: u32,
    /// Seed of the HP requests.
    pub seed: u64,
    /// Run the `policy` rows too.
    pub policies: bool,
}

impl Default for HarvestParams {
    /// About a minute: 400 inference requests (8 × 0.7–0.9 ms kernels, 20–60 µs gaps, 2–4 ms
    /// pre-processing, 0.2–0.5 ms post-processing, periodic, HP using half the device), as in
    /// `scenarios/hummingbird-inference.toml`; LP slices of 200 µs and 500 µs.
    fn default() -> Self {
        HarvestParams {
            shape: HpShape {
                kernels: 8,
                kernel: DurationRange::us(700, 900),
                gap: DurationRange::us(20, 60),
                pre: DurationRange::us(2000, 4000),
                post: DurationRange::us(200, 500),
                device_share: 0.5,
                poisson: false,
                requests: 400,
            },
            slices: vec![Duration::from_micros(200), Duration::from_micros(500)],
            lp_kernel: Duration::from_millis(5),
            launch_overhead: Duration::from_micros(100),
            release_overhead: Duration::from_micros(20),
            margin: Duration::from_micros(2000),
            warmup: 20,
            seed: 1,
            policies: true,
        }
    }
}

/// The HP requests of a run (warm-up included).
pub(super) fn requests(p: &HarvestParams) -> Vec<HpRequest> {
    HpShape {
        requests: p.shape.requests + p.warmup,
        ..p.shape.clone()
    }
    .generate(p.seed)
}

/// What one row measured.
#[derive(Debug, Clone, Default)]
pub(super) struct Measured {
    pub(super) hp: HpMeasured,
    /// LP work completed inside the window.
    pub(super) lp_work: Duration,
    /// The measured window.
    pub(super) window: Duration,
}

impl Measured {
    pub(super) fn of(hp: HpMeasured, lp_done: &[(Instant, Duration)]) -> Measured {
        let (from, until) = (hp.from, hp.until);
        let window = match (from, until) {
            (Some(f), Some(u)) => u.saturating_duration_since(f),
            _ => Duration::ZERO,
        };
        let lp_work = lp_done
            .iter()
            .filter(|(t, _)| from.is_some_and(|f| *t >= f) && until.is_some_and(|u| *t <= u))
            .map(|(_, d)| *d)
            .sum();
        Measured {
            hp,
            lp_work,
            window,
        }
    }

    pub(super) fn attainment(&self, slo: Duration) -> f64 {
        let l = &self.hp.latencies;
        l.iter().filter(|x| **x <= slo).count() as f64 / l.len().max(1) as f64
    }

    pub(super) fn lp_norm(&self) -> f64 {
        self.lp_work.as_secs_f64() / self.window.as_secs_f64().max(1e-9)
    }

    pub(super) fn utilization(&self) -> f64 {
        (self.hp.kernel_time.as_secs_f64() + self.lp_work.as_secs_f64())
            / self.window.as_secs_f64().max(1e-9)
    }

    pub(super) fn p99(&self) -> Duration {
        quantile(&self.hp.latencies, 0.99).unwrap_or(Duration::MAX)
    }
}

/// The second HP-alone row: how far a run's attainment strays from the SLO of another run of
/// the very same thing (the noise floor of "within 0.01" on this machine).
pub(super) const AGAIN: &str = "standalone (again)";

/// The cooperative rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Cooperative {
    Standalone,
    /// HP alone once more, run just before the `slo-aware` rows: how far a run of the very
    /// same thing strays from the SLO in that minute (the noise floor of "within 0.01").
    Again,
    Timeslice,
    Priority(Duration),
    SloAware(Duration),
}

impl Cooperative {
    pub(super) fn name(self) -> &'static str {
        match self {
            Cooperative::Standalone => "standalone",
            Cooperative::Again => AGAIN,
            Cooperative::Timeslice => "timeslice",
            Cooperative::Priority(_) => "priority",
            Cooperative::SloAware(_) => "slo-aware",
        }
    }

    pub(super) fn slice(self) -> Option<Duration> {
        match self {
            Cooperative::Priority(s) | Cooperative::SloAware(s) => Some(s),
            _ => None,
        }
    }
}

/// The policies the `policy` and `daemon` rows run, after HP alone twice.
pub(super) const POLICIES: [&str; 3] = ["hpf", "slo-aware:between-requests", "slo-aware"];
