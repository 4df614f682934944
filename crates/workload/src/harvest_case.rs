//! XSched's GPU-harvesting case study as both runners see it (the simulator's `case-harvest`
//! scenario and `xsched bench case-harvest`): the ways a production service and an
//! opportunistic job share a device, the checks against the paper's findings, and the figure
//! of harvested share against production slowdown, so the two report the same rows in the
//! same words.

use xsched_core::{CoreError, PolicySpec};
use xsched_report::plot::{Figure, Kind, Series};
use xsched_report::{Check, Verdict};

/// How the production service and the opportunistic job share the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// The production service alone.
    Standalone,
    /// Both, natively: the device's own arbitration.
    Native,
    /// vCUDA-like: the opportunistic job launches only in a fixed share of each window.
    Quota,
    /// TGS-like: that share follows the production job's pace (AIMD).
    Tgs,
    /// xsched, fixed priority at the device's highest level.
    Priority,
    /// xsched, SLO-aware harvesting of the production service's idle windows.
    SloAware,
}

/// Every mode, in report order.
pub const MODES: [ShareMode; 6] = [
    ShareMode::Standalone,
    ShareMode::Native,
    ShareMode::Quota,
    ShareMode::Tgs,
    ShareMode::Priority,
    ShareMode::SloAware,
];

/// The opportunistic jobs of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpJob {
    /// A training loop: iterations of short kernels with a CPU step between them.
    Training,
    /// A financial-computing kernel stream: long kernels back to back.
    Financial,
}

impl LpJob {
    /// Its name in scenario fields and rows.
    pub fn name(self) -> &'static str {
        match self {
            LpJob::Training => "training",
            LpJob::Financial => "financial",
        }
    }

    /// The job of a name.
    pub fn by_name(name: &str) -> Option<LpJob> {
        [LpJob::Training, LpJob::Financial]
            .into_iter()
            .find(|j| j.name() == name)
    }
}

impl ShareMode {
    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Standalone => "standalone",
            ShareMode::Native => "native",
            ShareMode::Quota => "quota",
            ShareMode::Tgs => "tgs",
            ShareMode::Priority => "xsched-priority",
            ShareMode::SloAware => "xsched-slo-aware",
        }
    }

    /// The core policy that runs the mode (`quota_share`: the opportunistic job's quota), or
    /// `None` where no scheduler runs; an error if `quota_share` is no share the `quota` policy
    /// takes.
    pub fn policy(self, quota_share: f64) -> Result<Option<PolicySpec>, CoreError> {
        Ok(match self {
            ShareMode::Standalone | ShareMode::Native => None,
            ShareMode::Quota => Some(format!("quota:{quota_share}").parse()?),
            ShareMode::Tgs => Some(PolicySpec::registered("tgs")),
            ShareMode::Priority => Some(PolicySpec::registered("hpf")),
            ShareMode::SloAware => Some(PolicySpec::registered("slo-aware")),
        })
    }

    /// Whether the mode preempts at the device's highest level (xsched); the baselines only
    /// hold back launches (Level 1).
    pub fn preempts(self) -> bool {
        matches!(self, ShareMode::Priority | ShareMode::SloAware)
    }
}

/// What one mode measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeResult {
    /// The opportunistic job's useful device work over the window (0-1).
    pub harvested: f64,
    /// The production service's mean latency over standalone, minus 1.
    pub slowdown: f64,
}

/// The paper's orderings as checks for one device and job (`what`, such as `gv100 training`),
/// from the outcomes of [`MODES`] in order. `slack` is the production slowdown xsched may
/// exceed TGS's by and still pass.
pub fn checks(what: &str, o: &[ModeResult; 6], slack: f64) -> Vec<Check> {
    let [_, _, quota, tgs, fp, _] = o;
    let pct = |x: f64| format!("{:.1} %", 100.0 * x);
    vec![
        Check {
            name: format!("{what}: xsched harvests more than TGS at no more slowdown"),
            target: format!(
                "paper (GV100, training): TGS 7.3 %, XSched 20.0 % at 1.0 % slowdown; slack {}",
                pct(slack)
            ),
            measured: format!(
                "TGS {} at {} slowdown, xsched {} at {}",
                pct(tgs.harvested),
                pct(tgs.slowdown),
                pct(fp.harvested),
                pct(fp.slowdown)
            ),
            verdict: Verdict::of(
                fp.harvested > tgs.harvested && fp.slowdown <= tgs.slowdown + slack,
            ),
        },
        Check {
            name: format!("{what}: a fixed quota slows production more than xsched"),
            target: "paper: vCUDA 15.1 % (training), 80.0 % (financial); XSched 1.0 %".into(),
            measured: format!("quota {}, xsched {}", pct(quota.slowdown), pct(fp.slowdown)),
            verdict: Verdict::of(quota.slowdown > fp.slowdown),
        },
    ]
}

/// Harvested share against production slowdown, one marker per device and job for each mode
/// but standalone: `points[i]` holds, for [`MODES`]`[i]`, each run's outcome.
pub fn tradeoff_figure(file: &str, title: String, points: &[Vec<ModeResult>]) -> Figure {
    Figure {
        file: file.into(),
        title,
        axes: (
            "production mean latency over standalone (log scale)".into(),
            "harvested share of the device (%)".into(),
        ),
        kind: Kind::Points { log_x: true },
        series: MODES
            .iter()
            .zip(points)
            .skip(1)
            .map(|(m, runs)| Series {
                name: m.name().into(),
                values: runs
                    .iter()
                    .map(|o| (1.0 + o.slowdown, 100.0 * o.harvested))
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(harvested: f64, slowdown: f64) -> ModeResult {
        ModeResult {
            harvested,
            slowdown,
        }
    }

    #[test]
    fn the_papers_orderings_pass_and_a_broken_policy_fails() {
        let good = [
            o(0.0, 0.0),
            o(0.4, 0.9),
            o(0.2, 0.15),
            o(0.07, 0.02),
            o(0.2, 0.01),
            o(0.18, 0.01),
        ];
        assert!(
            checks("x", &good, 0.02)
                .iter()
                .all(|c| c.verdict == Verdict::Met)
        );
        // xsched that harvests nothing fails the first; one that lets the job run freely
        // fails both.
        let idle = [good[0], good[1], good[2], good[3], o(0.0, 0.0), good[5]];
        assert_eq!(checks("x", &idle, 0.02)[0].verdict, Verdict::Missed);
        let free = [good[0], good[1], good[2], good[3], o(0.4, 0.9), good[5]];
        assert!(
            checks("x", &free, 0.02)
                .iter()
                .all(|c| c.verdict == Verdict::Missed)
        );
    }

    #[test]
    fn modes_name_their_policies_and_jobs_round_trip() {
        let text = |m: ShareMode| m.policy(0.25).map(|p| p.map(|p| p.to_string()));
        assert_eq!(text(ShareMode::Quota), Ok(Some("quota:0.25".to_string())));
        assert_eq!(text(ShareMode::Native), Ok(None));
        assert!(
            ShareMode::Quota.policy(1.5).is_err(),
            "a quota above the whole device"
        );
        assert!(ShareMode::SloAware.preempts() && !ShareMode::Tgs.preempts());
        for j in [LpJob::Training, LpJob::Financial] {
            assert_eq!(LpJob::by_name(j.name()), Some(j));
        }
        assert_eq!(LpJob::by_name("mining"), None);
    }

    #[test]
    fn the_figure_has_a_series_per_mode_but_standalone() {
        let runs: Vec<Vec<ModeResult>> = MODES.iter().map(|_| vec![o(0.1, 0.05)]).collect();
        let f = tradeoff_figure("f", "t".into(), &runs);
        assert_eq!(f.series.len(), MODES.len() - 1);
        assert_eq!(f.series[0].name, "native");
        assert_eq!(f.series[0].values, vec![(1.05, 10.0)]);
    }
}
