//! The `xsched` command: a thin shell over the library crates. It parses arguments, runs one
//! job and prints tables (or JSON); errors print as a one-line cause chain.

mod output;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    Demo {
        /// Simulated device profile to run on (see `xsched devices`).
        #[arg(long, default_value = "gv100")]
        device: String,
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
        Command::Demo { device, json } => {
            if profile::by_key(&device).is_none() {
                anyhow::bail!(
                    "unknown device `{device}`; known: {}",
                    profile::keys().join(", ")
                );
            }
            let scenario = Scenario::demo(&device).context("building the demo scenario")?;
            let report = output::run_with_progress(&scenario);
            output::print_report(&format!("demo on simulated {device}"), &report, json)
        }
        Command::Sim { file, json } => {
            let scenario = Scenario::load(&file).context("loading scenario")?;
            let report = output::run_with_progress(&scenario);
            output::print_report(&file.display().to_string(), &report, json)
        }
        Command::Devices { json } => output::print_devices(json),
    }
}
