//! `xsched bench NAME`: the real-device benchmarks with their default parameters.

use clap::{Args, ValueEnum};
use std::time::Duration;
use xsched_bench::{
    Report, adopt, case_ai_pc, case_harvest, case_two_model, cpu_share, daemon_rtt, fg_bg, harvest,
    multi_device, overhead, preempt, soak,
};
use xsched_report::plot::Figure;
use xsched_report::run::RunRecord;

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
    fn params(&self) -> soak::SoakParams {
        let d = soak::SoakParams::default();
        soak::SoakParams {
            clients: self.clients.unwrap_or(d.clients),
            commands: self.commands.unwrap_or(d.commands),
            kills: self.kills.unwrap_or(d.kills),
            restarts: self.restarts.unwrap_or(d.restarts),
            rate: self.rate.unwrap_or(d.rate),
            stopped_for: self.stopped_ms.map_or(d.stopped_for, Duration::from_millis),
            seed: self.seed.unwrap_or(d.seed),
        }
    }
}

impl Name {
    /// Whether the benchmark keeps a record for `xsched report` (`--record`).
    pub fn keeps_record(self) -> bool {
        self == Name::Adopt
    }

    /// The name as typed.
    pub fn label(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// What a benchmark produced: its table, the figures it draws (most draw none) and the record
/// it keeps for `xsched report` (only those whose [`Name::keeps_record`]).
pub struct BenchOutput {
    pub report: Report,
    pub figures: Vec<Figure>,
    pub record: Option<RunRecord>,
}

/// Run benchmark `name`; `samples` overrides its sample count where it has one.
pub fn run(
    name: Name,
    samples: Option<u32>,
    soak: &SoakArgs,
    tick: &dyn Fn(usize, usize),
) -> anyhow::Result<BenchOutput> {
    let with_figures = |(report, figures)| BenchOutput {
        report,
        figures,
        record: None,
    };
    let report = match name {
        Name::FgBg => {
            let mut p = fg_bg::FgBgParams::default();
            p.requests = samples.unwrap_or(p.requests);
            fg_bg::run(&p, tick)?
        }
        Name::Adopt => {
            let mut p = adopt::AdoptParams::default();
            p.workload.requests = samples.unwrap_or(p.workload.requests);
            let (report, record) = adopt::run(&p, tick)?;
            return Ok(BenchOutput {
                report,
                figures: Vec::new(),
                record: Some(record),
            });
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
        Name::CaseAiPc => {
            let mut p = case_ai_pc::AiPcParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_ai_pc::run(&p, tick)?));
        }
        Name::CaseHarvest => {
            let mut p = case_harvest::CaseHarvestParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_harvest::run(&p, tick)?));
        }
        Name::CaseTwoModel => {
            let mut p = case_two_model::TwoModelParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_two_model::run(&p, tick)?));
        }
        Name::Soak => soak::run(&std::env::current_exe()?, &soak.params(), tick)?,
        Name::Daemon => {
            let mut p = daemon_rtt::DaemonRttParams::default();
            p.samples = samples.unwrap_or(p.samples);
            daemon_rtt::run(&p, tick).map_err(|e| anyhow::anyhow!(e))?
        }
    };
    Ok(with_figures((report, Vec::new())))
}
