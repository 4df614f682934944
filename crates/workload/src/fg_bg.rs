//! The foreground-beside-background experiment (XSched Fig. 9) as its runners see it: the
//! simulator's `fg-bg` scenario and the CPU device's `xsched demo` run the same modes in the
//! same order and check the foreground's P99 over standalone with the same checks, each against
//! the target that fits its device.
//!
//! On a real machine the standalone P99 is itself a measurement, and a noisy one: on a shared
//! machine one run of it can come out slower or faster than the next by more than the effect
//! being judged, and a ratio below 1 (the foreground faster beside a saturating background than
//! alone) is then the machine speaking, not the scheduler. So a real run measures standalone
//! several times, interleaved with the other modes, and judges every ratio against that
//! [`Baseline`]: when the baseline moved more than [`BASELINE_BOUND`] between its runs, or a
//! ratio falls below 1 by more than the baseline's spread, the check says the machine was too
//! noisy ([`Verdict::Inconclusive`]) instead of met or missed.

use xsched_core::Level;
use xsched_report::{Check, Verdict};

/// How the foreground and the saturating background share the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// The foreground alone.
    Standalone,
    /// Both, without xsched: the device's own arbitration, nobody suspends anything.
    Native,
    /// Both under xsched's fixed-priority policy (foreground higher) at a level.
    XSched(Level),
}

impl ShareMode {
    /// Standalone, native, then xsched at each of `levels`: the report's order.
    pub fn all(levels: &[Level]) -> Vec<ShareMode> {
        let mut modes = vec![ShareMode::Standalone, ShareMode::Native];
        modes.extend(levels.iter().map(|&l| ShareMode::XSched(l)));
        modes
    }

    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Standalone => "standalone",
            ShareMode::Native => "native",
            ShareMode::XSched(_) => "xsched",
        }
    }

    /// The level, under xsched.
    pub fn level(self) -> Option<Level> {
        match self {
            ShareMode::XSched(l) => Some(l),
            ShareMode::Standalone | ShareMode::Native => None,
        }
    }
}

/// The paper's band for the native P99 ratio, which a simulated device with the paper's
/// profile reproduces.
pub const NATIVE_BAND: (f64, f64) = (1.6, 2.2);

/// The paper's ceiling for xsched's P99 ratio (XSched: 1.02-1.30 on real XPUs), at every level
/// of a simulated device.
pub const XSCHED_MAX: f64 = 1.30;

/// The ceiling at Level 3 on the CPU device, whose interrupt costs a few microseconds: tighter
/// than the paper's (its Levels 1 and 2 drain whole 1 ms kernels and are not checked).
pub const CPU_INTERRUPT_MAX: f64 = 1.10;

/// How far the standalone P99 may move between its runs (max − min over their pooled P99) for a
/// real run's ratios to be judged. From twenty demo runs on the project's 2-vCPU machines
/// (docs/results/xqueue-preemption.md, "The demo's verdicts against a judged baseline"): quiet runs moved
/// 6–9 %, loaded ones 17–24 %, and every run that moved 29 % or more had one round standing out
/// and Level-3 ratios the next run did not repeat.
pub const BASELINE_BOUND: f64 = 0.25;

/// The standalone P99 of a real run: pooled over all its runs, and each run's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// P99 over every standalone request of the run (µs): what ratios divide by.
    pub p99_us: f64,
    /// Each standalone run's own P99 (µs), in the order they ran.
    pub runs_us: Vec<f64>,
}

impl Baseline {
    /// How far the runs' P99s spread, over the pooled P99: `(max − min) / p99` (0 with fewer
    /// than two runs, which cannot show a spread).
    pub fn spread(&self) -> f64 {
        let max = self.runs_us.iter().copied().fold(f64::NAN, f64::max);
        let min = self.runs_us.iter().copied().fold(f64::NAN, f64::min);
        if self.runs_us.len() < 2 || self.p99_us <= 0.0 {
            return 0.0;
        }
        (max - min) / self.p99_us
    }

    /// Why a ratio against this baseline cannot be judged, if it cannot: the baseline moved
    /// more than [`BASELINE_BOUND`] between its runs, or `ratio` is below 1 by more than the
    /// spread (the foreground faster beside a saturating background than alone).
    pub fn noise(&self, ratio: f64) -> Option<String> {
        let spread = self.spread();
        if spread > BASELINE_BOUND {
            Some(format!(
                "standalone moved {:.0} % between its runs (bound {:.0} %)",
                spread * 100.0,
                BASELINE_BOUND * 100.0
            ))
        } else if ratio < 1.0 - spread {
            Some(format!(
                "{ratio:.2} is below 1 by more than standalone's spread ({:.0} %)",
                spread * 100.0
            ))
        } else {
            None
        }
    }

    /// The check that reports the baseline itself: its pooled P99 and its runs', met when it
    /// moved at most [`BASELINE_BOUND`].
    pub fn check(&self, device: &str) -> Check {
        let runs: Vec<String> = self
            .runs_us
            .iter()
            .map(|us| format!("{:.2}", us / 1000.0))
            .collect();
        let spread = self.spread();
        Check {
            name: format!("{device} standalone P99 steady between its runs"),
            target: format!("moves <= {:.0} %", BASELINE_BOUND * 100.0),
            measured: format!(
                "{:.2} ms; runs {} ms; moved {:.0} %",
                self.p99_us / 1000.0,
                runs.join(", "),
                spread * 100.0
            ),
            verdict: if spread > BASELINE_BOUND {
                Verdict::Inconclusive
            } else {
                Verdict::Met
            },
        }
    }

    /// [`xsched_check`] judged against this baseline: inconclusive where [`Baseline::noise`]
    /// says so, with the reason in the measured text.
    pub fn xsched_check(&self, device: &str, level: Level, ratio: f64, max: f64) -> Check {
        let mut c = xsched_check(device, level, false, ratio, max);
        if let Some(why) = self.noise(ratio) {
            c.measured = format!("{} (not judged: {why})", c.measured);
            c.verdict = Verdict::Inconclusive;
        }
        c
    }
}

/// `device`'s native P99 ratio within [`NATIVE_BAND`], compared at the paper's precision (two
/// decimals read off its plots).
pub fn native_check(device: &str, ratio: f64) -> Check {
    Check {
        name: format!("{device} native P99 ratio"),
        target: format!("paper band {:.1}-{:.1}", NATIVE_BAND.0, NATIVE_BAND.1),
        measured: format!("{ratio:.2}"),
        verdict: Verdict::of(
            (NATIVE_BAND.0..=NATIVE_BAND.1).contains(&((ratio * 100.0).round() / 100.0)),
        ),
    }
}

/// `device`'s P99 ratio under xsched at `level` (with a time budget or not) at most `max`.
pub fn xsched_check(device: &str, level: Level, budget: bool, ratio: f64, max: f64) -> Check {
    Check {
        name: format!(
            "{device} xsched {level}{} P99 ratio",
            if budget { " budget" } else { "" }
        ),
        target: format!("<= {max:.2}"),
        measured: format!("{ratio:.2}"),
        verdict: Verdict::of(ratio <= max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_come_in_report_order_with_their_names() {
        let modes = ShareMode::all(&[Level::Block, Level::Interrupt]);
        let names: Vec<_> = modes.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["standalone", "native", "xsched", "xsched"]);
        assert_eq!(modes[3].level(), Some(Level::Interrupt));
        assert_eq!(modes[1].level(), None);
    }

    fn baseline(runs_us: &[f64]) -> Baseline {
        Baseline {
            p99_us: 1000.0,
            runs_us: runs_us.to_vec(),
        }
    }

    #[test]
    fn a_steady_baseline_judges_ratios_as_before() {
        let b = baseline(&[950.0, 1000.0, 1050.0]);
        assert!((b.spread() - 0.1).abs() < 1e-12);
        assert_eq!(b.check("cpu").verdict, Verdict::Met);
        assert_eq!(
            b.xsched_check("cpu", Level::Interrupt, 1.05, 1.1).verdict,
            Verdict::Met
        );
        assert_eq!(
            b.xsched_check("cpu", Level::Interrupt, 1.2, 1.1).verdict,
            Verdict::Missed
        );
        // Below 1 within the spread: the foreground as fast as alone, judged.
        assert_eq!(
            b.xsched_check("cpu", Level::Interrupt, 0.91, 1.1).verdict,
            Verdict::Met
        );
    }

    #[test]
    fn a_ratio_below_one_by_more_than_the_spread_is_not_judged() {
        let b = baseline(&[980.0, 1000.0]);
        let c = b.xsched_check("cpu", Level::Interrupt, 0.84, 1.1);
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(
            c.measured.contains("below 1 by more than"),
            "{}",
            c.measured
        );
    }

    #[test]
    fn a_baseline_that_moved_more_than_the_bound_judges_nothing() {
        let b = baseline(&[700.0, 1000.0, 1100.0]);
        assert!(b.spread() > BASELINE_BOUND);
        assert_eq!(b.check("cpu").verdict, Verdict::Inconclusive);
        let c = b.xsched_check("cpu", Level::Interrupt, 1.02, 1.1);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.measured.contains("moved 40 %"), "{}", c.measured);
        assert!(b.check("cpu").measured.contains("runs 0.70, 1.00, 1.10 ms"));
    }

    #[test]
    fn one_run_shows_no_spread() {
        assert_eq!(baseline(&[1000.0]).spread(), 0.0);
        assert_eq!(baseline(&[]).spread(), 0.0);
    }

    #[test]
    fn the_checks_pass_inside_their_targets_only() {
        assert!(native_check("d", 1.6).verdict == Verdict::Met);
        assert!(
            native_check("d", 2.204).verdict == Verdict::Met,
            "two decimals, as read off the plots"
        );
        assert!(
            native_check("d", 1.5).verdict == Verdict::Missed
                && native_check("d", 2.3).verdict == Verdict::Missed
        );
        let c = xsched_check("d", Level::Interrupt, true, 1.2, XSCHED_MAX);
        assert!(c.verdict == Verdict::Met);
        assert_eq!(c.name, "d xsched L3 budget P99 ratio");
        assert!(
            xsched_check("d", Level::Interrupt, false, 1.2, CPU_INTERRUPT_MAX).verdict
                == Verdict::Missed
        );
    }
}
