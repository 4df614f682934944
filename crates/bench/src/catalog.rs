//! `xsched bench NAME`'s catalog: every benchmark with its default parameters, the one figure
//! `--samples` overrides in each, which ones start worker processes from the `xsched` binary,
//! keep a record for `xsched report` or draw figures. It is here, not in the CLI, so that the
//! command only parses its arguments and prints what [`run`] returns.

use crate::error::BenchError;
use crate::soak::SoakOverrides;
use crate::{
    Report, adopt, case_ai_pc, case_harvest, case_two_model, cpu_share, daemon_rtt, fg_bg, harvest,
    multi_device, overhead, preempt, soak,
};
use std::path::Path;
use xsched_report::plot::Figure;
use xsched_report::run::RunRecord;

/// The benchmarks (each one a module of this crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// [`fg_bg`]: `--samples` sets the requests per mode.
    FgBg,
    /// [`adopt`]: `--samples` sets the workload's requests; keeps a record.
    Adopt,
    /// [`preempt`]: `--samples` sets the samples per point.
    Preempt,
    /// [`overhead`]: no sample count.
    Overhead,
    /// [`cpu_share`]: no sample count.
    CpuShare,
    /// [`daemon_rtt`]: `--samples` sets the round trips.
    Daemon,
    /// [`multi_device`]: `--samples` sets the requests.
    MultiDevice,
    /// [`harvest`] in process: `--samples` sets the requests.
    Harvest,
    /// [`harvest`] as two processes under a daemon: `--samples` sets the requests.
    HarvestDaemon,
    /// [`case_ai_pc`]: `--samples` sets the runs; draws figures.
    CaseAiPc,
    /// [`case_harvest`]: `--samples` sets the runs; draws figures.
    CaseHarvest,
    /// [`case_two_model`]: `--samples` sets the runs; draws figures.
    CaseTwoModel,
    /// [`soak`]: its own settings ([`SoakOverrides`]), no sample count.
    Soak,
}

impl Bench {
    /// Whether the benchmark keeps a record for `xsched report`.
    pub fn keeps_record(self) -> bool {
        self == Bench::Adopt
    }

    /// Whether the benchmark starts worker processes from the `xsched` binary ([`run`]'s
    /// `exe`).
    pub fn needs_exe(self) -> bool {
        matches!(self, Bench::HarvestDaemon | Bench::Soak)
    }
}

/// What a benchmark produced: its table, the figures it draws (most draw none) and the record
/// it keeps for `xsched report` (only those whose [`Bench::keeps_record`]).
pub struct BenchOutput {
    /// The table.
    pub report: Report,
    /// The figures.
    pub figures: Vec<Figure>,
    /// The record.
    pub record: Option<RunRecord>,
}

/// Run benchmark `bench` with its default parameters; `samples` overrides its sample count
/// where it has one, `soak` the soak's settings, and `exe` is the `xsched` binary the
/// benchmarks that [`Bench::needs_exe`] start workers from.
pub fn run(
    bench: Bench,
    samples: Option<u32>,
    soak: &SoakOverrides,
    exe: Option<&Path>,
    tick: &dyn Fn(usize, usize),
) -> Result<BenchOutput, BenchError> {
    let with_figures = |(report, figures)| BenchOutput {
        report,
        figures,
        record: None,
    };
    let worker_exe = || exe.ok_or(BenchError::NoExe);
    let report = match bench {
        Bench::FgBg => {
            let mut p = fg_bg::FgBgParams::default();
            p.requests = samples.unwrap_or(p.requests);
            fg_bg::run(&p, tick)?
        }
        Bench::Adopt => {
            let mut p = adopt::AdoptParams::default();
            p.workload.requests = samples.unwrap_or(p.workload.requests);
            let (report, record) = adopt::run(&p, tick)?;
            return Ok(BenchOutput {
                report,
                figures: Vec::new(),
                record: Some(record),
            });
        }
        Bench::Preempt => {
            let mut p = preempt::PreemptParams::default();
            p.samples = samples.unwrap_or(p.samples);
            preempt::run(&p, tick)?
        }
        Bench::Overhead => overhead::run(&overhead::OverheadParams::default(), tick)?,
        Bench::CpuShare => cpu_share::run(&cpu_share::CpuShareParams::default(), tick)?,
        Bench::MultiDevice => {
            let mut p = multi_device::MultiDeviceParams::default();
            p.requests = samples.unwrap_or(p.requests);
            multi_device::run(&p, tick)?
        }
        Bench::Harvest => harvest::run(&harvest_params(samples), tick)?,
        Bench::HarvestDaemon => {
            harvest::run_processes(worker_exe()?, &harvest_params(samples), tick)?
        }
        Bench::CaseAiPc => {
            let mut p = case_ai_pc::AiPcParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_ai_pc::run(&p, tick)?));
        }
        Bench::CaseHarvest => {
            let mut p = case_harvest::CaseHarvestParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_harvest::run(&p, tick)?));
        }
        Bench::CaseTwoModel => {
            let mut p = case_two_model::TwoModelParams::default();
            p.runs = samples.unwrap_or(p.runs);
            return Ok(with_figures(case_two_model::run(&p, tick)?));
        }
        Bench::Soak => soak::run(worker_exe()?, &soak.params(), tick)?,
        Bench::Daemon => {
            let mut p = daemon_rtt::DaemonRttParams::default();
            p.samples = samples.unwrap_or(p.samples);
            daemon_rtt::run(&p, tick)?
        }
    };
    Ok(with_figures((report, Vec::new())))
}

/// Hummingbird's parameters (in process and as two processes), `samples` requests.
fn harvest_params(samples: Option<u32>) -> harvest::HarvestParams {
    let mut p = harvest::HarvestParams::default();
    p.shape.requests = samples.unwrap_or(p.shape.requests);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_adopt_keeps_a_record_and_only_process_benchmarks_need_the_binary() {
        assert!(Bench::Adopt.keeps_record());
        assert!(!Bench::FgBg.keeps_record() && !Bench::CaseAiPc.keeps_record());
        assert!(Bench::Soak.needs_exe() && Bench::HarvestDaemon.needs_exe());
        assert!(!Bench::Harvest.needs_exe() && !Bench::Daemon.needs_exe());
    }

    #[test]
    fn a_process_benchmark_without_the_binary_is_refused_before_it_starts() {
        for bench in [Bench::Soak, Bench::HarvestDaemon] {
            let out = run(bench, Some(1), &SoakOverrides::default(), None, &|_, _| {});
            assert!(matches!(out, Err(BenchError::NoExe)), "{bench:?}");
        }
    }
}
