//! Harvesting an HP service's idle device time for best-effort LP work (Hummingbird,
//! ../shared/docs/PAPERS.md §2), against the usual ways of sharing one device.
//!
//! Why a separate model from [`crate::engine`]: Hummingbird's questions are about *when* LP
//! work may occupy the device between and inside HP requests (slices, idle windows, slack),
//! not about launch pipelines; one device, one HP service and one saturating LP job in exact
//! virtual time answer them directly. Device facts (time slice, context switch, kill cost)
//! come from the simulated XPU profiles.
//!
//! Policies (row names of the `hummingbird` scenario):
//! - `standalone`: HP alone (the SLO is its P99 latency × the scenario's factor).
//! - `spatial`: MPS-like: HP and LP kernels run at once, each slowed by the device's published
//!   interference (two processes together reach `speedup` × one).
//! - `timeslice`: native time slicing: LP holds the device for a slice once it has it; HP
//!   waits for the slice to end plus a context switch.
//! - `priority`: XSched fixed priority: LP slices run only while no HP request is in flight.
//! - `reset`: REEF-like: LP kernels run whenever no HP kernel is queued and are killed (their
//!   progress lost, the kill costs the device's interrupt time) when one is.
//! - `slo-aware`: Hummingbird: LP runs as slices placed into HP's predicted idle windows (merged
//!   into longer slices when a window is long), or beyond a window when every in-flight HP
//!   request's slack covers the delay; a running slice is killed only when an HP request would
//!   otherwise miss its deadline.

mod spatial;
mod temporal;

use xsched_core::Nanos;
use xsched_workload::service::HpRequest;

/// How the device is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharePolicy {
    /// HP alone.
    Standalone,
    /// Concurrent execution with interference.
    Spatial,
    /// Native round-robin time slices.
    Timeslice,
    /// LP only while HP is idle.
    Priority,
    /// Kill-and-restart of LP kernels.
    Reset,
    /// Hummingbird's SLO-aware harvesting.
    SloAware,
}

impl SharePolicy {
    /// Every policy, in row order.
    pub const ALL: [SharePolicy; 6] = [
        SharePolicy::Standalone,
        SharePolicy::Spatial,
        SharePolicy::Timeslice,
        SharePolicy::Priority,
        SharePolicy::Reset,
        SharePolicy::SloAware,
    ];

    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            SharePolicy::Standalone => "standalone",
            SharePolicy::Spatial => "spatial",
            SharePolicy::Timeslice => "timeslice",
            SharePolicy::Priority => "priority",
            SharePolicy::Reset => "reset",
            SharePolicy::SloAware => "slo-aware",
        }
    }
}

/// The device and the LP job.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// One LP kernel's work (the LP job is an endless series of them).
    pub lp_kernel: Nanos,
    /// LP slice length (`priority`, `slo-aware`); a multiple of the LP tile.
    pub slice: Nanos,
    /// The LP kernel's unit of work (a block of its grid): the finest slice.
    pub tile: Nanos,
    /// Device time lost per LP launch (a slice, or a whole kernel where unsliced).
    pub launch_overhead: Nanos,
    /// Killing a running LP kernel or slice (`reset`, `slo-aware`).
    pub kill: Nanos,
    /// Native time slice and context switch (`timeslice`).
    pub timeslice: Nanos,
    /// Context-switch cost.
    pub switch: Nanos,
    /// Spatial sharing: throughput of two kernels together relative to one.
    pub spatial_speedup: f64,
    /// HP deadline: arrival + this.
    pub slo: Nanos,
    /// Slack `slo-aware` keeps in reserve when it lets LP delay HP.
    pub margin: Nanos,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct HarvestRun {
    /// Each HP request's latency (all complete).
    pub latencies: Vec<Nanos>,
    /// HP kernel time run.
    pub hp_busy: Nanos,
    /// LP work completed (standalone time it represents).
    pub lp_useful: Nanos,
    /// From the first arrival's time origin to the last HP completion.
    pub window: Nanos,
    /// Per HP kernel that found LP holding the device: how long until it ran.
    pub preempt_delays: Vec<Nanos>,
}

impl HarvestRun {
    /// Fraction of HP requests finished within `slo`.
    pub fn attainment(&self, slo: Nanos) -> f64 {
        let ok = self.latencies.iter().filter(|l| **l <= slo).count();
        ok as f64 / self.latencies.len().max(1) as f64
    }

    /// LP work per unit time, over LP alone (which would use the whole device).
    pub fn lp_throughput_norm(&self) -> f64 {
        self.lp_useful.0 as f64 / self.window.0.max(1) as f64
    }

    /// Useful work (HP kernels + completed LP work) per unit time. Above 1 only under spatial
    /// sharing, where two kernels together outrun one.
    pub fn utilization(&self) -> f64 {
        (self.hp_busy.0 + self.lp_useful.0) as f64 / self.window.0.max(1) as f64
    }

    /// The P99 latency, `None` without requests.
    pub fn p99(&self) -> Option<Nanos> {
        xsched_report::quantile(&self.latencies, 0.99)
    }
}

/// Run `policy` on the HP requests with an endless LP job beside them.
pub fn run(policy: SharePolicy, hp: &[HpRequest], p: &Params) -> HarvestRun {
    match policy {
        SharePolicy::Spatial => spatial::run(hp, p),
        _ => temporal::run(policy, hp, p),
    }
}
