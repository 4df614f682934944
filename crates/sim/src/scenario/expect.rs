//! What a scenario file says its run will show: every check met, except the misses the docs
//! state, each named in the file with its reason (`[[known_miss]]`). The simulator is exact and
//! deterministic, so a run that misses anything else, or meets a known miss, has changed
//! something the docs describe: `xsched sim` fails it (unless told `--allow-misses`), and the
//! test command runs every shipped scenario that way.

use serde::Deserialize;
use xsched_report::{Report, Verdict};

/// A check the docs say this scenario misses, and why.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KnownMiss {
    /// The check's name, as the report prints it.
    pub check: String,
    /// Why it is missed (what the docs say), for the reader of the file.
    pub why: String,
}

/// Where a run departs from what its file expects: each item a sentence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Surprises(pub Vec<String>);

impl Surprises {
    /// Nothing unexpected.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Compare `report`'s checks with the `known` misses: a missed check not listed, a listed one
/// met (the docs are stale), a listed name no check has (a typo), and a check left unjudged.
pub fn surprises(report: &Report, known: &[KnownMiss]) -> Surprises {
    let mut out = Vec::new();
    for c in &report.checks {
        let listed = known.iter().any(|k| k.check == c.name);
        match (c.verdict, listed) {
            (Verdict::Missed, false) => out.push(format!(
                "missed `{}` (target {}, measured {})",
                c.name, c.target, c.measured
            )),
            (Verdict::Met, true) => out.push(format!(
                "`{}` is listed as a known miss but was met ({}): remove it from the file and \
                 the docs",
                c.name, c.measured
            )),
            (Verdict::Inconclusive, _) => {
                out.push(format!("`{}` could not be judged ({})", c.name, c.measured));
            }
            _ => {}
        }
    }
    for k in known {
        if !report.checks.iter().any(|c| c.name == k.check) {
            out.push(format!(
                "known miss `{}` names no check of this run; its checks: {}",
                k.check,
                report
                    .checks
                    .iter()
                    .map(|c| format!("`{}`", c.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Surprises(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xsched_report::{Check, columns};

    fn report(checks: &[(&str, Verdict)]) -> Report {
        let checks = checks
            .iter()
            .map(|&(name, verdict)| Check {
                name: name.into(),
                target: "<= 1".into(),
                measured: "2".into(),
                verdict,
            })
            .collect();
        Report::new("x", columns(&["a"]), Vec::new()).with_checks(checks)
    }

    fn known(name: &str) -> KnownMiss {
        KnownMiss {
            check: name.into(),
            why: "the docs say so".into(),
        }
    }

    #[test]
    fn a_known_miss_passes_and_a_new_one_fails() {
        let r = report(&[
            ("a", Verdict::Met),
            ("b", Verdict::Missed),
            ("c", Verdict::Reported),
        ]);
        assert!(surprises(&r, &[known("b")]).is_empty());
        let s = surprises(&r, &[]);
        assert_eq!(s.0.len(), 1);
        assert!(s.0[0].starts_with("missed `b`"), "{s:?}");
    }

    #[test]
    fn a_known_miss_that_is_met_or_names_nothing_fails() {
        let r = report(&[("a", Verdict::Met)]);
        let s = surprises(&r, &[known("a"), known("typo")]);
        assert_eq!(s.0.len(), 2, "{s:?}");
        assert!(s.0[0].contains("was met"), "{s:?}");
        assert!(
            s.0[1].contains("names no check") && s.0[1].contains("`a`"),
            "{s:?}"
        );
    }
}
