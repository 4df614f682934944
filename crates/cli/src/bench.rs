//! `xsched bench NAME`: the real-device benchmarks with their default parameters. What each one
//! runs with is `xsched_bench::catalog`'s; here are its arguments.

use clap::{Args, ValueEnum};
use xsched_bench::catalog::{self, Bench, BenchOutput};
use xsched_bench::soak::SoakOverrides;

/// The benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// The demo with --samples requests per mode.
    FgBg,
    /// The adoption path: the demo natively, then in observe, cooperative and preemptive mode,
    /// with every queue's accounting (--record keeps what `xsched report` draws).
    Adopt,
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
    /// XSched's AI-PC case study: camera-paced video blur beside speech jobs with a deadline,
    /// under FCFS, fixed priority and laxity (time / 10; --samples sets the runs).
    CaseAiPc,
    /// XSched's GPU-harvesting case study: a production service beside a training loop or long
    /// financial kernels, natively, under a fixed quota, a TGS-like rate and xsched (Levels 3
    /// and 1; --samples sets the runs).
    CaseHarvest,
    /// XSched's two-model serving case study: a foreground and a background inference service,
    /// natively, with Triton-like request priorities, xsched and Paella-like kernel dispatch
    /// (time x 10; --samples sets the runs).
    CaseTwoModel,
    /// Client processes under a daemon that is killed, stopped and restarted while clients are
    /// killed: every surviving client's commands run exactly once.
    Soak,
}

/// `xsched bench soak`'s settings (defaults: 8 clients, 1 000 000 commands, 4 client kills, 3
/// daemon disturbances).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Soak (bench soak only)")]
pub struct SoakArgs {
    /// Client processes alive at once.
    #[arg(long)]
    clients: Option<usize>,
    /// Commands in all.
    #[arg(long)]
    commands: Option<u64>,
    /// Clients SIGKILLed and replaced during the run.
    #[arg(long)]
    kills: Option<usize>,
    /// Daemon disturbances (SIGKILL + restart, SIGSTOP/SIGCONT alternately).
    #[arg(long)]
    restarts: Option<usize>,
    /// Commands per second each client submits (sets the run's length; the disturbances are
    /// spread over it).
    #[arg(long)]
    rate: Option<u32>,
    /// Milliseconds a stopped daemon stays stopped.
    #[arg(long)]
    stopped_ms: Option<u64>,
    /// Seed for the order of disturbances and the clients killed.
    #[arg(long)]
    seed: Option<u64>,
}

impl SoakArgs {
    fn overrides(&self) -> SoakOverrides {
        SoakOverrides {
            clients: self.clients,
            commands: self.commands,
            kills: self.kills,
            restarts: self.restarts,
            rate: self.rate,
            stopped_ms: self.stopped_ms,
            seed: self.seed,
        }
    }
}

impl Name {
    /// Whether the benchmark keeps a record for `xsched report` (`--record`).
    pub fn keeps_record(self) -> bool {
        self.bench().keeps_record()
    }

    /// The name as typed.
    pub fn label(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// The library's benchmark of that name.
    fn bench(self) -> Bench {
        match self {
            Name::FgBg => Bench::FgBg,
            Name::Adopt => Bench::Adopt,
            Name::Preempt => Bench::Preempt,
            Name::Overhead => Bench::Overhead,
            Name::CpuShare => Bench::CpuShare,
            Name::Daemon => Bench::Daemon,
            Name::MultiDevice => Bench::MultiDevice,
            Name::Harvest => Bench::Harvest,
            Name::HarvestDaemon => Bench::HarvestDaemon,
            Name::CaseAiPc => Bench::CaseAiPc,
            Name::CaseHarvest => Bench::CaseHarvest,
            Name::CaseTwoModel => Bench::CaseTwoModel,
            Name::Soak => Bench::Soak,
        }
    }
}

/// Run benchmark `name`; `samples` overrides its sample count where it has one.
pub fn run(
    name: Name,
    samples: Option<u32>,
    soak: &SoakArgs,
    tick: &dyn Fn(usize, usize),
) -> anyhow::Result<BenchOutput> {
    let bench = name.bench();
    let exe = bench.needs_exe().then(std::env::current_exe).transpose()?;
    let output = catalog::run(bench, samples, &soak.overrides(), exe.as_deref(), tick)?;
    Ok(output)
}
