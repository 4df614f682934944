//! `xsched worker`: the hidden subcommand that runs one scheduled client process for the demo,
//! the benchmarks and the tests.

use anyhow::{Context, Result};
use clap::Args;
use xsched_bench::roles::Role;
use xsched_bench::workers;

#[derive(Args)]
pub(crate) struct WorkerArgs {
    /// What the process does: batch (submit `--commands` kernels, at most `--window`
    /// outstanding), fg / bg (the demo's foreground requests / background loop until standard
    /// input closes), hp-service / lp (the harvesting benchmark's two jobs), soak (host
    /// commands that count their own runs).
    #[arg(long, value_parser = Role::from_name, default_value = "batch")]
    role: Role,
    /// Pin the device's worker thread to this core.
    #[arg(long)]
    core: Option<usize>,
    /// Measured requests (fg, hp-service).
    #[arg(long, default_value_t = 400)]
    requests: u32,
    /// Kernel length (batch, lp).
    #[arg(long, default_value_t = 1000)]
    kernel_us: u64,
    /// How many kernels (batch).
    #[arg(long, default_value_t = 100)]
    commands: u32,
    /// Most kernels outstanding at once (batch).
    #[arg(long, default_value_t = 16)]
    window: usize,
    /// Commands per second, paced (soak); 0 submits as fast as the window allows.
    #[arg(long, default_value_t = 0)]
    rate: u32,
}

/// `xsched worker`: one scheduled client process, its report printed.
pub(crate) fn run_worker(w: WorkerArgs) -> Result<()> {
    let report = workers::run(workers::WorkerArgs {
        role: w.role,
        core: w.core,
        requests: w.requests,
        kernel_us: w.kernel_us,
        commands: w.commands,
        window: w.window,
        rate: w.rate,
    })
    .context("running the worker")?;
    println!("{report}");
    Ok(())
}
