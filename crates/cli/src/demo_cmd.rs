//! `xsched demo`: a foreground beside a saturating background, on the CPU device, as two
//! processes with the daemon, or on a simulated profile; and the `--device` it takes.

use crate::common_args::Output;
use crate::output;
use anyhow::{Context, Result};
use xsched_bench::fg_bg;
use xsched_report::Report;
use xsched_sim::{Scenario, profile};

/// Where the demo runs.
#[derive(Clone, Debug)]
pub(crate) enum DemoDevice {
    /// The built-in CPU device (real threads and kernels).
    Cpu,
    /// A simulated XPU profile.
    Simulated(String),
}

pub(crate) fn device(s: &str) -> Result<DemoDevice, String> {
    if s == "cpu" {
        return Ok(DemoDevice::Cpu);
    }
    match profile::by_key(s) {
        Some(_) => Ok(DemoDevice::Simulated(s.to_string())),
        None => Err(format!(
            "unknown device `{s}`; known: cpu, {}",
            profile::keys().join(", ")
        )),
    }
}

/// `xsched demo`: the demo's report, an error under `--strict` unless every target was met.
pub(crate) fn run_demo(
    device: DemoDevice,
    requests: u32,
    processes: bool,
    strict: bool,
    output: Output,
) -> Result<()> {
    let report = demo(device, requests, processes, output)?;
    if strict && !report.all_met() {
        anyhow::bail!("--strict: {}", report.summary());
    }
    Ok(())
}

fn demo(device: DemoDevice, requests: u32, processes: bool, output: Output) -> Result<Report> {
    let json = output.json;
    let (title, report) = match (device, processes) {
        (DemoDevice::Simulated(_), true) => {
            anyhow::bail!("--processes runs on the CPU device only")
        }
        (DemoDevice::Cpu, true) => {
            let exe = std::env::current_exe().context("locating the xsched binary")?;
            let report =
                output::with_progress(|tick| xsched_bench::two_process::run(&exe, requests, tick))
                    .context("running the two-process demo")?;
            ("demo with two processes and the daemon".to_string(), report)
        }
        (DemoDevice::Cpu, false) => {
            let params = fg_bg::FgBgParams {
                requests,
                ..fg_bg::FgBgParams::default()
            };
            let report = output::with_progress(|tick| fg_bg::run(&params, tick))
                .context("running the demo on the CPU device")?;
            ("demo on the CPU device".to_string(), report)
        }
        (DemoDevice::Simulated(key), false) => {
            let scenario = Scenario::demo(&key).context("building the demo scenario")?;
            let (report, _) = output::run_with_progress(&scenario);
            (format!("demo on simulated {key}"), report)
        }
    };
    output::print_report(&title, &report, json)?;
    Ok(report)
}
