//! `xsched probe --compare OLD.json`: every figure of an earlier table that got worse in this
//! one, the check to run after a driver or firmware update. A latency or cost regressed when it
//! grew by more than the threshold (a fraction) *and* by more than an absolute floor, so that
//! microsecond noise on an idle figure is not called a regression; a level, a backend or a kept
//! state that is gone is always one.

use super::table::{BackendProbe, LevelProbe, ProbeTable};

/// How much worse a figure may get before it is flagged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative growth allowed (0.5: up to 1.5 times the old figure).
    pub fraction: f64,
    /// Growth in µs that is never flagged, whatever the fraction.
    pub floor_us: f64,
}

impl Default for Tolerance {
    /// 50 % and 20 µs: beyond the run-to-run spread measured on the 2-core VMs here.
    fn default() -> Self {
        Tolerance {
            fraction: 0.5,
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

/// Every regression from `old` to `new`.
pub fn compare(old: &ProbeTable, new: &ProbeTable, tol: Tolerance) -> Vec<Regression> {
    let mut out = Vec::new();
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
            Some(nb) => compare_backend(&name, ob, nb, tol, &mut out),
        }
    }
    out
}

fn compare_backend(
    name: &str,
    old: &BackendProbe,
    new: &BackendProbe,
    tol: Tolerance,
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
            Some(nl) => compare_level(&level, ol, nl, tol, out),
        }
    }
}

fn compare_level(
    level: &str,
    old: &LevelProbe,
    new: &LevelProbe,
    tol: Tolerance,
    out: &mut Vec<Regression>,
) {
    let mut figure = |what: String, o: f64, n: f64| {
        if n > o * (1.0 + tol.fraction) && n - o > tol.floor_us {
            out.push(Regression {
                figure: format!("{level} {what}"),
                old: format!("{o} us"),
                new: format!("{n} us"),
            });
        }
    };
    for op in &old.latency {
        let Some(np) = new.latency.iter().find(|p| p.cmd_us == op.cmd_us) else {
            continue;
        };
        let at = |q: &str| format!("cmd {} us {q}", op.cmd_us);
        figure(at("p50"), op.p50_us, np.p50_us);
        figure(at("p99"), op.p99_us, np.p99_us);
        figure(at("p99.9"), op.p999_us, np.p999_us);
    }
    figure("suspend p99".into(), old.suspend_us.p99, new.suspend_us.p99);
    figure("resume p99".into(), old.resume_us.p99, new.resume_us.p99);
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
