//! XSched's AI-PC case study as both runners see it (the simulator's `case-ai-pc` scenario and
//! `xsched bench case-ai-pc`): the ways the NPU is shared, the checks against the paper's
//! findings, and the frame-interval figure, so the two report the same rows in the same words.

use xsched_report::plot::{Figure, Kind, Series};
use xsched_report::{Check, Verdict};

/// How the blur and the speech jobs share the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// The blur alone.
    Standalone,
    /// Both, natively: the device's FCFS.
    Fcfs,
    /// xsched, fixed priority: the blur above speech.
    Priority,
    /// xsched, laxity: speech critical once its laxity expired.
    Laxity,
}

/// Every mode, in report order.
pub const MODES: [ShareMode; 4] = [
    ShareMode::Standalone,
    ShareMode::Fcfs,
    ShareMode::Priority,
    ShareMode::Laxity,
];

impl ShareMode {
    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Standalone => "standalone",
            ShareMode::Fcfs => "fcfs",
            ShareMode::Priority => "fixed-priority",
            ShareMode::Laxity => "laxity",
        }
    }

    /// Whether xsched schedules the queues in this mode.
    pub fn scheduled(self) -> bool {
        matches!(self, ShareMode::Priority | ShareMode::Laxity)
    }
}

/// What one mode measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeResult {
    /// The blur's P99 frame interval (ms).
    pub p99_ms: f64,
    /// Speech jobs that were due in the measured window.
    pub jobs: u64,
    /// Of those, the ones done within their period.
    pub on_time: u64,
}

impl ModeResult {
    /// Lost transcripts: jobs that missed their period.
    pub fn lost(&self) -> u64 {
        self.jobs - self.on_time.min(self.jobs)
    }
}

/// The paper's findings as checks, from the outcomes of [`MODES`] in order.
pub fn checks(o: &[ModeResult; 4]) -> Vec<Check> {
    let [alone, fcfs, fp, lax] = o;
    vec![
        Check {
            name: "laxity: every speech job within its period".into(),
            target: "0 lost (paper: all on time)".into(),
            measured: format!("{} of {} lost", lax.lost(), lax.jobs),
            verdict: Verdict::of(lax.jobs > 0 && lax.lost() == 0),
        },
        Check {
            name: "fixed priority: speech starves".into(),
            target: "transcripts lost (paper)".into(),
            measured: format!("{} of {} lost", fp.lost(), fp.jobs),
            verdict: Verdict::of(fp.lost() > 0),
        },
        Check {
            name: "FCFS blur P99 frame interval".into(),
            target: "paper 880 ms (20.12x standalone); >= 10x here".into(),
            measured: format!("{:.1} ms ({:.2}x)", fcfs.p99_ms, fcfs.p99_ms / alone.p99_ms),
            verdict: Verdict::of(fcfs.p99_ms >= 10.0 * alone.p99_ms),
        },
        Check {
            name: "laxity blur P99 frame interval".into(),
            target: "paper 95 ms, 9.26x better than FCFS; >= 5x better here".into(),
            measured: format!(
                "{:.1} ms ({:.2}x better)",
                lax.p99_ms,
                fcfs.p99_ms / lax.p99_ms
            ),
            verdict: Verdict::of(5.0 * lax.p99_ms <= fcfs.p99_ms),
        },
    ]
}

/// The CDF of the blur's frame interval per mode: `intervals_ms` are each mode's intervals, in
/// [`MODES`] order.
pub fn interval_cdf(file: &str, title: String, intervals_ms: Vec<Vec<f64>>) -> Figure {
    Figure {
        file: file.into(),
        title,
        axes: (
            "frame interval (ms, log scale)".into(),
            "fraction of frames".into(),
        ),
        kind: Kind::Cdf { log_x: true },
        series: MODES
            .iter()
            .zip(intervals_ms)
            .map(|(m, ms)| Series {
                name: m.name().into(),
                values: ms.into_iter().map(|x| (x, 0.0)).collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(p99_ms: f64, jobs: u64, on_time: u64) -> ModeResult {
        ModeResult {
            p99_ms,
            jobs,
            on_time,
        }
    }

    #[test]
    fn the_papers_orderings_pass_and_a_broken_policy_fails() {
        let good = [
            o(40.0, 0, 0),
            o(800.0, 20, 20),
            o(41.0, 20, 0),
            o(140.0, 20, 20),
        ];
        assert!(
            checks(&good).iter().all(|c| c.verdict == Verdict::Met),
            "{:?}",
            checks(&good)
        );
        // Laxity that behaves like FCFS: late jobs none, but the video stalls as long.
        let fcfs_like = [good[0], good[1], good[2], o(800.0, 20, 20)];
        let failed: Vec<_> = checks(&fcfs_like)
            .into_iter()
            .filter(|c| c.verdict == Verdict::Missed)
            .map(|c| c.name)
            .collect();
        assert_eq!(failed, ["laxity blur P99 frame interval"]);
        assert_eq!(o(1.0, 3, 5).lost(), 0, "never negative");
    }
}
