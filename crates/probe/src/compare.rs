//! `xsched probe --compare OLD.json`: every figure of an earlier table that got worse in this
//! one, the check to run after a driver or firmware update. A latency or cost regressed when it
//! grew by more than its threshold (a fraction: one for medians, a looser one for tails, which
//! vary more between identical probes) *and* by more than an absolute floor, so that
//! microsecond noise on a small figure is not called a regression; a level, a backend, a
//! command length or a kept state that is gone is always one. Maxima are not compared: each is
//! one sample.

use crate::table::{BackendProbe, LevelProbe, ProbeTable};

/// How much worse a figure may get before it is flagged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative growth allowed of a median (0.5: up to 1.5 times the old figure).
    pub fraction: f64,
    /// Relative growth allowed of a tail (P99, P99.9, a cost's P99).
    pub tail_fraction: f64,
    /// Growth in µs that is never flagged, whatever the fraction.
    pub floor_us: f64,
}

impl Default for Tolerance {
    /// Medians 50 %, tails 100 %, and 20 µs: for a machine that runs nothing else (on a noisy
    /// small VM identical probes differ more, so compare there with wider tolerances).
    fn default() -> Self {
        Tolerance {
            fraction: 0.5,
            tail_fraction: 1.0,
            floor_us: 20.0,
        }
    }
}

/// One figure that got worse.
#[derive(Clone, Debug, PartialEq)]
pub struct Regression {
    /// Which figure (`opencl POCL-device L2 cmd 1000 us p99`).
    pub figure: String,
    /// The old value, in words.
    pub old: String,
    /// The new value, in words.
    pub new: String,
}

/// Fewer samples per point than this, and a P99.9 is within a sample or two of the maximum:
/// it is reported, but not compared.
pub const P999_SAMPLES: u32 = 1000;

/// Every regression from `old` to `new`.
pub fn compare(old: &ProbeTable, new: &ProbeTable, tol: Tolerance) -> Vec<Regression> {
    let mut out = Vec::new();
    let p999 = old.samples.min(new.samples) >= P999_SAMPLES;
    for ob in &old.backends {
        let name = format!("{} {}", ob.backend, ob.device);
        match new
            .backends
            .iter()
            .find(|b| b.backend == ob.backend && b.device == ob.device)
        {
            None => out.push(Regression {
                figure: name,
                old: "probed".into(),
                new: "absent".into(),
            }),
            Some(nb) => compare_backend(&name, ob, nb, (tol, p999), &mut out),
        }
    }
    out
}

/// The tolerance, and whether P99.9s are compared.
type Tolerances = (Tolerance, bool);

fn compare_backend(
    name: &str,
    old: &BackendProbe,
    new: &BackendProbe,
    rules: Tolerances,
    out: &mut Vec<Regression>,
) {
    for ol in &old.levels {
        let level = format!("{name} L{}", ol.level);
        match new.levels.iter().find(|l| l.level == ol.level) {
            None => out.push(Regression {
                figure: level,
                old: "offered".into(),
                new: "not offered".into(),
            }),
            Some(nl) => compare_level(&level, ol, nl, rules, out),
        }
    }
}

fn compare_level(
    level: &str,
    old: &LevelProbe,
    new: &LevelProbe,
    (tol, p999): Tolerances,
    out: &mut Vec<Regression>,
) {
    let worse = |what: String, o: f64, n: f64| {
        let fraction = if what.ends_with("p50") {
            tol.fraction
        } else {
            tol.tail_fraction
        };
        (n > o * (1.0 + fraction) && n - o > tol.floor_us).then(|| Regression {
            figure: format!("{level} {what}"),
            old: format!("{o} us"),
            new: format!("{n} us"),
        })
    };
    for op in &old.latency {
        let Some(np) = new.latency.iter().find(|p| p.cmd_us == op.cmd_us) else {
            out.push(Regression {
                figure: format!("{level} cmd {} us", op.cmd_us),
                old: "measured".into(),
                new: "not measured".into(),
            });
            continue;
        };
        let at = |q: &str| format!("cmd {} us {q}", op.cmd_us);
        out.extend(worse(at("p50"), op.p50_us, np.p50_us));
        out.extend(worse(at("p99"), op.p99_us, np.p99_us));
        if p999 {
            out.extend(worse(at("p99.9"), op.p999_us, np.p999_us));
        }
    }
    out.extend(worse(
        "suspend p99".into(),
        old.suspend_us.p99,
        new.suspend_us.p99,
    ));
    out.extend(worse(
        "resume p99".into(),
        old.resume_us.p99,
        new.resume_us.p99,
    ));
    if old.state_kept == Some(true) && new.state_kept != Some(true) {
        out.push(Regression {
            figure: format!("{level} state kept"),
            old: "yes".into(),
            new: match new.state_kept {
                Some(false) => "no".into(),
                _ => "not measured".into(),
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{FORMAT, LatencyPoint, Spread};

    fn table(p50: f64, p99: f64, levels: &[u8], kept: Option<bool>) -> ProbeTable {
        let cost = Spread {
            p50: 1.0,
            p99: 5.0,
            max: 9.0,
        };
        let level = |level: u8| LevelProbe {
            level,
            latency: vec![LatencyPoint {
                cmd_us: 100.0,
                p50_us: p50,
                p99_us: p99,
                p999_us: p99,
                max_us: p99,
            }],
            suspend_us: cost,
            resume_us: cost,
            state: "s".into(),
            state_kept: kept,
        };
        ProbeTable {
            format: FORMAT,
            taken_unix_s: 0,
            machine: "m".into(),
            xsched: "0".into(),
            samples: 1,
            repeats: 1,
            backends: vec![BackendProbe {
                backend: "cpu".into(),
                device: "d".into(),
                runtime: "r".into(),
                levels: levels.iter().map(|&l| level(l)).collect(),
            }],
        }
    }

    fn flagged(old: &ProbeTable, new: &ProbeTable) -> Vec<String> {
        compare(old, new, Tolerance::default())
            .into_iter()
            .map(|r| r.figure)
            .collect()
    }

    #[test]
    fn medians_and_tails_have_their_own_thresholds_above_the_floor() {
        let old = table(100.0, 400.0, &[1], None);
        // P50 +60 % (over 50 %), P99 +90 % (under 100 %).
        assert_eq!(
            flagged(&old, &table(160.0, 760.0, &[1], None)),
            ["cpu d L1 cmd 100 us p50"]
        );
        // P99 +110 %: a tail regression; P99.9 is not compared from one sample.
        assert_eq!(
            flagged(&old, &table(100.0, 840.0, &[1], None)),
            ["cpu d L1 cmd 100 us p99"]
        );
        let many = |mut t: ProbeTable| {
            t.samples = P999_SAMPLES;
            t
        };
        let p999 = flagged(&many(old.clone()), &many(table(100.0, 840.0, &[1], None)));
        assert_eq!(
            p999,
            ["cpu d L1 cmd 100 us p99", "cpu d L1 cmd 100 us p99.9"]
        );
        // Tripled, but by 10 us only: under the floor.
        let small = table(5.0, 5.0, &[1], None);
        assert!(flagged(&small, &table(15.0, 15.0, &[1], None)).is_empty());
        // Better is never a regression.
        assert!(flagged(&old, &table(10.0, 40.0, &[1], None)).is_empty());
    }

    #[test]
    fn a_level_a_backend_or_a_kept_state_that_is_gone_is_flagged() {
        let old = table(100.0, 400.0, &[1, 3], Some(true));
        assert_eq!(
            flagged(&old, &table(100.0, 400.0, &[1], Some(true))),
            ["cpu d L3"]
        );
        let lost = flagged(&old, &table(100.0, 400.0, &[1, 3], Some(false)));
        assert_eq!(lost, ["cpu d L1 state kept", "cpu d L3 state kept"]);
        let mut none = old.clone();
        none.backends.clear();
        assert_eq!(flagged(&old, &none), ["cpu d"]);
        let mut shorter = old.clone();
        shorter.backends[0].levels[0].latency.clear();
        assert_eq!(
            flagged(&old, &shorter),
            ["cpu d L1 cmd 100 us"],
            "a length not measured"
        );
    }
}
