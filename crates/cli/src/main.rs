//! The `xsched` command: a thin shell over the library crates. It parses arguments, runs one
//! job and prints tables (or JSON); errors print as a one-line cause chain.

mod bench;
mod output;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use xsched_bench::fg_bg;
use xsched_sim::{Scenario, profile};

#[derive(Parser)]
#[command(
    name = "xsched",
    version,
    about = "Preemptive scheduling for shared accelerators"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Foreground beside a saturating background: standalone, native and xsched P99 side by side.
    ///
    /// Runs on the built-in CPU device with real kernels (about 17 s); `--device KEY` runs the
    /// same experiment on a simulated XPU profile instead (see `xsched devices`).
    Demo {
        /// `cpu` (real threads and kernels) or a simulated profile key such as `gv100`.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Measured foreground requests per mode on the CPU device.
        #[arg(long, default_value_t = 400)]
        requests: u32,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a real-device benchmark on the CPU device: fg-bg, preempt, overhead, cpu-share.
    Bench {
        /// Which benchmark.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(xsched_bench::NAMES))]
        name: String,
        /// Samples per point (preempt) or measured requests per mode (fg-bg).
        #[arg(long)]
        samples: Option<u32>,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario file (see scenarios/).
    Sim {
        /// The scenario TOML file.
        file: PathBuf,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the devices and their capability tables.
    Devices {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("XSCHED_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Cli::parse()) {
        let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
        eprintln!("error: {}", chain.join(": "));
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo {
            device,
            requests,
            json,
        } => {
            if device == "cpu" {
                let params = fg_bg::FgBgParams {
                    requests,
                    ..fg_bg::FgBgParams::default()
                };
                let report = output::with_progress(|tick| fg_bg::run(&params, tick))
                    .context("running the demo on the CPU device")?;
                return output::print_report("demo on the CPU device", &report, json);
            }
            if profile::by_key(&device).is_none() {
                anyhow::bail!(
                    "unknown device `{device}`; known: cpu, {}",
                    profile::keys().join(", ")
                );
            }
            let scenario = Scenario::demo(&device).context("building the demo scenario")?;
            let report = output::run_with_progress(&scenario);
            output::print_report(&format!("demo on simulated {device}"), &report, json)
        }
        Command::Bench {
            name,
            samples,
            json,
        } => {
            let report = output::with_progress(|tick| bench::run(&name, samples, tick))
                .with_context(|| format!("running benchmark `{name}`"))?;
            output::print_report(&format!("bench {name}"), &report, json)
        }
        Command::Sim { file, json } => {
            let scenario = Scenario::load(&file).context("loading scenario")?;
            let report = output::run_with_progress(&scenario);
            output::print_report(&file.display().to_string(), &report, json)
        }
        Command::Devices { json } => output::print_devices(json),
    }
}
