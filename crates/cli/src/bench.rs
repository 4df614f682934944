//! `xsched bench NAME`: the real-device benchmarks with their default parameters.

use xsched_bench::{
    Report, cpu_share, daemon_rtt, fg_bg, harvest, multi_device, overhead, preempt,
};

/// Run benchmark `name`; `samples` overrides its sample count where it has one.
pub fn run(
    name: &str,
    samples: Option<u32>,
    tick: &dyn Fn(usize, usize),
) -> anyhow::Result<Report> {
    Ok(match name {
        "fg-bg" => {
            let mut p = fg_bg::FgBgParams::default();
            p.requests = samples.unwrap_or(p.requests);
            fg_bg::run(&p, tick)?
        }
        "preempt" => {
            let mut p = preempt::PreemptParams::default();
            p.samples = samples.unwrap_or(p.samples);
            preempt::run(&p, tick)?
        }
        "overhead" => overhead::run(&overhead::OverheadParams::default(), tick)?,
        "multi-device" => {
            let mut p = multi_device::MultiDeviceParams::default();
            p.requests = samples.unwrap_or(p.requests);
            multi_device::run(&p, tick)?
        }
        "harvest" => {
            let mut p = harvest::HarvestParams::default();
            p.shape.requests = samples.unwrap_or(p.shape.requests);
            harvest::run(&p, tick)?
        }
        "harvest-daemon" => {
            let mut p = harvest::HarvestParams::default();
            p.shape.requests = samples.unwrap_or(p.shape.requests);
            let exe = std::env::current_exe()?;
            harvest::run_processes(&exe, &p, tick)?
        }
        "daemon" => {
            let mut p = daemon_rtt::DaemonRttParams::default();
            p.samples = samples.unwrap_or(p.samples);
            daemon_rtt::run(&p, tick).map_err(|e| anyhow::anyhow!(e))?
        }
        _ => cpu_share::run(&cpu_share::CpuShareParams::default(), tick)?,
    })
}
