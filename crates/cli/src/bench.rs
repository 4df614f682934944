//! `xsched bench NAME`: the real-device benchmarks with their default parameters.

use clap::ValueEnum;
use xsched_bench::{
    Report, cpu_share, daemon_rtt, fg_bg, harvest, multi_device, overhead, preempt,
};

/// The benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// The demo with --samples requests per mode.
    FgBg,
    /// Preemption latency vs command length, per level.
    Preempt,
    /// Submit cost and throughput loss vs direct launching.
    Overhead,
    /// The scheduler's own CPU time, idle and at 10 k commands/s.
    CpuShare,
    /// Event → operation through the daemon vs a raw socket.
    Daemon,
    /// A pipeline on two devices: per-device vs global policy.
    MultiDevice,
    /// Hummingbird: LP harvesting an HP service's idle time (collector and policies).
    Harvest,
    /// The harvesting policies with HP and LP as two processes under the daemon.
    HarvestDaemon,
}

impl Name {
    /// The name as typed.
    pub fn label(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// Run benchmark `name`; `samples` overrides its sample count where it has one.
pub fn run(
    name: Name,
    samples: Option<u32>,
    tick: &dyn Fn(usize, usize),
) -> anyhow::Result<Report> {
    Ok(match name {
        Name::FgBg => {
            let mut p = fg_bg::FgBgParams::default();
            p.requests = samples.unwrap_or(p.requests);
            fg_bg::run(&p, tick)?
        }
        Name::Preempt => {
            let mut p = preempt::PreemptParams::default();
            p.samples = samples.unwrap_or(p.samples);
            preempt::run(&p, tick)?
        }
        Name::Overhead => overhead::run(&overhead::OverheadParams::default(), tick)?,
        Name::CpuShare => cpu_share::run(&cpu_share::CpuShareParams::default(), tick)?,
        Name::MultiDevice => {
            let mut p = multi_device::MultiDeviceParams::default();
            p.requests = samples.unwrap_or(p.requests);
            multi_device::run(&p, tick)?
        }
        Name::Harvest => {
            let mut p = harvest::HarvestParams::default();
            p.shape.requests = samples.unwrap_or(p.shape.requests);
            harvest::run(&p, tick)?
        }
        Name::HarvestDaemon => {
            let mut p = harvest::HarvestParams::default();
            p.shape.requests = samples.unwrap_or(p.shape.requests);
            let exe = std::env::current_exe()?;
            harvest::run_processes(&exe, &p, tick)?
        }
        Name::Daemon => {
            let mut p = daemon_rtt::DaemonRttParams::default();
            p.samples = samples.unwrap_or(p.samples);
            daemon_rtt::run(&p, tick).map_err(|e| anyhow::anyhow!(e))?
        }
    })
}
