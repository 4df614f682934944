//! XSched's two-model serving case study as its runners see it (the simulator's
//! `case-two-model` scenario): the ways two inference services, one foreground, share a device,
//! the checks against the paper's findings, and the figure of the foreground's P99 over
//! standalone against the request rate.

use xsched_report::plot::{Figure, Kind, Series};
use xsched_report::{Check, Verdict};

/// How the two services share the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// The foreground service alone.
    Standalone,
    /// Both natively: the device's own arbitration.
    Native,
    /// Triton-like: requests ordered by priority in the server; a request's kernels, once
    /// launched, are never held back.
    Triton,
    /// xsched, fixed priority at the device's highest level.
    XSched,
    /// Paella-like: one central dispatcher hands each client's kernels to the device one or two
    /// at a time, the background held between kernels while the foreground has work, at a cost
    /// per kernel.
    Paella,
}

/// Every mode, in report order.
pub const MODES: [ShareMode; 5] = [
    ShareMode::Standalone,
    ShareMode::Native,
    ShareMode::Triton,
    ShareMode::XSched,
    ShareMode::Paella,
];

impl ShareMode {
    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Standalone => "standalone",
            ShareMode::Native => "native",
            ShareMode::Triton => "triton-priority",
            ShareMode::XSched => "xsched",
            ShareMode::Paella => "paella",
        }
    }
}

/// The foreground's P99 over standalone, per mode in [`MODES`] order but standalone, at one
/// request rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratios {
    /// Total requests per second of both services.
    pub rate: f64,
    /// Native, Triton-like, xsched, Paella-like.
    pub native: f64,
    /// Triton-like.
    pub triton: f64,
    /// xsched.
    pub xsched: f64,
    /// Paella-like.
    pub paella: f64,
}

/// The paper's findings as checks over the rates swept (in increasing order).
pub fn checks(r: &[Ratios]) -> Vec<Check> {
    let list = |f: &dyn Fn(&Ratios) -> f64| {
        r.iter()
            .map(|x| format!("{:.2}", f(x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let top = r.last();
    vec![
        Check {
            name: "xsched's foreground P99 ratio below Triton's at every rate".into(),
            target: "paper: XSched 1.07x, Triton priorities 1.51x".into(),
            measured: format!(
                "xsched {}; triton {}",
                list(&|x| x.xsched),
                list(&|x| x.triton)
            ),
            verdict: Verdict::of(!r.is_empty() && r.iter().all(|x| x.xsched < x.triton)),
        },
        Check {
            name: "xsched at or below Paella at the highest rate".into(),
            target: "paper: equal at low rates, XSched 1.3x better at 1 000 req/s".into(),
            measured: top.map_or("no rates".into(), |x| {
                format!(
                    "{:.0} req/s: xsched {:.2}, paella {:.2}",
                    x.rate, x.xsched, x.paella
                )
            }),
            verdict: Verdict::of(top.is_some_and(|x| x.xsched <= x.paella)),
        },
    ]
}

/// Foreground P99 over standalone against the total request rate, one line per mode but
/// standalone.
pub fn ratio_figure(file: &str, title: String, r: &[Ratios]) -> Figure {
    let line = |name: &str, f: &dyn Fn(&Ratios) -> f64| Series {
        name: name.into(),
        values: r.iter().map(|x| (x.rate, f(x))).collect(),
    };
    Figure {
        file: file.into(),
        title,
        axes: (
            "total request rate (req/s)".into(),
            "foreground P99 over standalone".into(),
        ),
        kind: Kind::Lines,
        series: vec![
            line(ShareMode::Native.name(), &|x| x.native),
            line(ShareMode::Triton.name(), &|x| x.triton),
            line(ShareMode::XSched.name(), &|x| x.xsched),
            line(ShareMode::Paella.name(), &|x| x.paella),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rate: f64, triton: f64, xsched: f64, paella: f64) -> Ratios {
        Ratios {
            rate,
            native: 1.5,
            triton,
            xsched,
            paella,
        }
    }

    #[test]
    fn the_papers_orderings_pass_and_a_broken_policy_fails() {
        let good = [at(100.0, 1.5, 1.05, 1.05), at(1000.0, 1.5, 1.07, 1.4)];
        assert!(checks(&good).iter().all(|c| c.verdict == Verdict::Met));
        let broken = [at(100.0, 1.5, 1.6, 1.05), at(1000.0, 1.5, 1.6, 1.4)];
        assert!(checks(&broken).iter().all(|c| c.verdict == Verdict::Missed));
        assert!(checks(&[]).iter().all(|c| c.verdict == Verdict::Missed));
        let f = ratio_figure("f", "t".into(), &good);
        assert_eq!(f.series.len(), MODES.len() - 1);
        assert_eq!(f.series[2].values, vec![(100.0, 1.05), (1000.0, 1.07)]);
    }
}
