//! The `xsched` command: a thin shell over the library crates. It parses arguments into the
//! libraries' types, runs one job and prints tables (or JSON); errors print as a one-line
//! cause chain. What a run measures and which targets it checks is the libraries' business.

mod account_cmd;
mod bench;
mod common_args;
mod daemon_args;
mod daemon_cmds;
mod demo_cmd;
mod embedding_arg;
mod gateway_cmd;
mod llm_cmd;
mod load_cmd;
mod output;
mod probe_cmd;
#[cfg(test)]
mod reference;
mod replay_cmd;
mod report_cmd;
mod run_cmd;
mod worker_cmd;

use crate::common_args::{Output, Socket, policy_help};
use crate::daemon_args::{HintArgs, ModeAction, PolicyAction};
use crate::demo_cmd::{DemoDevice, device};
use crate::llm_cmd::LlmArgs;
use crate::worker_cmd::WorkerArgs;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use xsched_core::PolicySpec;
use xsched_sim::Scenario;

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
        #[arg(long, default_value = "cpu", value_parser = device)]
        device: DemoDevice,
        /// Measured foreground requests per mode on the CPU device.
        #[arg(long, default_value_t = 400)]
        requests: u32,
        /// Run the foreground and the background as two processes scheduled through a daemon
        /// the demo starts and stops itself (both devices pinned to one core; CPU device only).
        #[arg(long)]
        processes: bool,
        /// Exit non-zero unless every target was met: a missed target, or one the run could not
        /// judge because its standalone baseline moved too much (a noisy machine), fails it.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Run a real-device benchmark on the CPU device.
    Bench {
        /// Which benchmark.
        name: bench::Name,
        /// Samples per point (preempt) or measured requests per mode (fg-bg, harvest, ...).
        #[arg(long)]
        samples: Option<u32>,
        /// Write the benchmark's figures (SVG) into this directory (the case-* benchmarks draw one each).
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
        /// Write what the run recorded (latency CDFs, queue-state timelines, accounting) as
        /// JSON, for `xsched report` (adopt only).
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        #[command(flatten)]
        soak: bench::SoakArgs,
        #[command(flatten)]
        output: Output,
    },
    /// Run a program unchanged with its OpenCL queues under xsched (the OpenCL shim stands in
    /// for libOpenCL.so.1, however the program opens it).
    Run {
        /// XSCHED_PRIORITY for the program's queues (higher runs first under `hpf`).
        #[arg(long, allow_hyphen_values = true)]
        priority: Option<i32>,
        /// XSCHED_LEVEL for the program's queues.
        #[arg(long)]
        level: Option<u8>,
        /// Schedule through the daemon (XSCHED_SCHEDULER=global, at --socket).
        #[arg(long)]
        global: bool,
        #[command(flatten)]
        socket: Socket,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Run a scenario file (see scenarios/).
    Sim {
        /// The scenario TOML file.
        file: PathBuf,
        /// Write the experiment's figures (SVG) into this directory (the case studies draw
        /// theirs; other experiments have none).
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
        /// Exit 0 even when a check is missed that the file does not list as a known miss
        /// (`[[known_miss]]`), or a listed one is met; by default such a run fails.
        #[arg(long)]
        allow_misses: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Run the xsched daemon: one scheduler for every process (`XSCHED_SCHEDULER=global`).
    Serve {
        #[command(flatten)]
        socket: Socket,
        #[arg(long, default_value = "hpf", help = policy_help("Scheduling policy"))]
        policy: PolicySpec,
        /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464).
        #[arg(long)]
        metrics_addr: Option<String>,
        /// The daemon's configuration (TOML: authority, socket permissions, limits; see
        /// docs/reference/config-files.md). Without one, the safe defaults apply.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Show every queue the daemon schedules.
    Top {
        #[command(flatten)]
        socket: Socket,
        /// Print once and exit (default: refresh every second).
        #[arg(long)]
        once: bool,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Get or set the daemon's policy.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
        #[command(flatten)]
        socket: Socket,
    },
    /// Advise the daemon about a process's queues (same user, or root).
    Hint(HintArgs),
    /// Switch the rollout mode of a running process's queues through the daemon (same user,
    /// or root).
    Mode {
        #[command(subcommand)]
        action: ModeAction,
    },
    /// What every queue the daemon schedules went through (commands, device time, waits,
    /// misses, preemptions), and the totals per process and per tenant (uid).
    Account {
        #[command(flatten)]
        socket: Socket,
        /// Print one JSON document instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// A scheduled client process (used by the demo, the benchmarks and the tests): one queue
    /// configured from XSCHED_* variables.
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// LLM request scheduling: policies side by side on real prompts over a load sweep.
    Llm(Box<LlmArgs>),
    /// Draw what a run recorded (`xsched bench adopt --record RUN.json`) as one self-contained
    /// HTML page: latency CDFs, queue-state timelines and the accounting table.
    Report {
        /// The run's record (JSON).
        run: PathBuf,
        /// The page to write.
        #[arg(short, long, value_name = "FILE", default_value = "report.html")]
        output: PathBuf,
    },
    /// Measure each available backend and level on this machine: preemption latency over a
    /// sweep of command lengths, suspend/resume cost and what state survives, stamped with the
    /// driver version (`--compare OLD.json` flags what regressed, e.g. after a driver update).
    Probe(probe_cmd::ProbeArgs),
    /// List the devices and their capability tables (and the last probe's figures).
    Devices {
        #[command(flatten)]
        output: Output,
    },
}

fn main() {
    xsched_runtime::init_logging(true);
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
            processes,
            strict,
            output,
        } => demo_cmd::run_demo(device, requests, processes, strict, output),
        Command::Bench {
            name,
            samples,
            plot,
            record,
            soak,
            output,
        } => run_bench(name, samples, plot, record, &soak, output),
        Command::Report { run, output } => report_cmd::render(&run, &output),
        Command::Probe(args) => probe_cmd::run(&args),
        Command::Sim {
            file,
            plot,
            allow_misses,
            output,
        } => run_sim(file, plot, allow_misses, output),
        Command::Devices { output } => probe_cmd::devices(output.json),
        Command::Run {
            priority,
            level,
            global,
            socket,
            command,
        } => run_program(priority, level, global, &socket, command),
        Command::Llm(args) => llm_cmd::run_llm(&args),
        Command::Serve {
            socket,
            policy,
            metrics_addr,
            config,
        } => run_serve(&socket, &policy, metrics_addr, config),
        Command::Top { socket, once, json } => daemon_cmds::top(&socket.path(), once, json),
        Command::Policy { action, socket } => daemon_args::run_policy(action, &socket),
        Command::Mode {
            action:
                ModeAction::Set {
                    pid,
                    queue,
                    mode,
                    socket,
                },
        } => daemon_cmds::set_mode(&socket.path(), pid, queue, mode),
        Command::Account { socket, json } => account_cmd::run(&socket.path(), json),
        Command::Hint(args) => daemon_args::run_hint(&args),
        Command::Worker(w) => worker_cmd::run_worker(w),
    }
}

/// `xsched bench`: one benchmark, its figures and its record where asked, then its report.
fn run_bench(
    name: bench::Name,
    samples: Option<u32>,
    plot: Option<PathBuf>,
    record: Option<PathBuf>,
    soak: &bench::SoakArgs,
    output: Output,
) -> Result<()> {
    if record.is_some() && !name.keeps_record() {
        anyhow::bail!(
            "--record: benchmark `{}` keeps no record (adopt does)",
            name.label()
        );
    }
    let outcome = output::with_progress(|tick| bench::run(name, samples, soak, tick))
        .with_context(|| format!("running benchmark `{}`", name.label()))?;
    let title = format!("bench {}", name.label());
    output::write_figures(plot.as_deref(), &outcome.figures, &title)?;
    if let (Some(path), Some(r)) = (&record, &outcome.record) {
        report_cmd::write_record(path, r)?;
    }
    output::print_report(&title, &outcome.report, output.json)
}

/// `xsched sim`: a scenario file's report, an error when its checks surprise the file.
fn run_sim(file: PathBuf, plot: Option<PathBuf>, allow_misses: bool, output: Output) -> Result<()> {
    let scenario = Scenario::load(&file).context("loading scenario")?;
    let (report, figures) = output::run_with_progress(&scenario);
    let title = file.display().to_string();
    output::write_figures(plot.as_deref(), &figures, &title)?;
    output::print_report(&title, &report, output.json)?;
    let surprises = scenario.surprises(&report);
    let known = scenario.known_misses().len();
    if !output.json && known > 0 {
        println!("known misses: {known} (listed in the file, each with its reason)");
    }
    if surprises.is_empty() || allow_misses {
        return Ok(());
    }
    anyhow::bail!(
        "{title}: not what the file expects (--allow-misses to exit 0 anyway):\n  {}",
        surprises.0.join("\n  ")
    )
}

/// `xsched run`: the program under xsched, through the daemon at `socket` when `global`.
fn run_program(
    priority: Option<i32>,
    level: Option<u8>,
    global: bool,
    socket: &Socket,
    command: Vec<std::ffi::OsString>,
) -> Result<()> {
    run_cmd::run(&run_cmd::RunArgs {
        priority,
        level,
        global: global.then(|| socket.path()),
        command,
    })
}

/// `xsched serve`: the daemon at `socket` under `policy`.
fn run_serve(
    socket: &Socket,
    policy: &PolicySpec,
    metrics_addr: Option<String>,
    config: Option<PathBuf>,
) -> Result<()> {
    daemon_cmds::serve(
        &socket.path(),
        policy,
        metrics_addr.as_deref(),
        config.as_deref(),
    )
}
