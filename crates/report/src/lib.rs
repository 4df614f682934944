//! # xsched-report
//!
//! What every experiment hands back, whoever ran it: the simulator's scenarios (virtual time),
//! the real-device benchmarks (wall clock) and the LLM sweeps. One [`Report`] type, one way to
//! build rows, one histogram constructor and one quantile convention, so a figure means the same
//! thing in every table and the benchmarks need not depend on the simulator to print one.
//!
//! The quantile convention is the *nearest rank*: the `q` quantile of `n` values is the
//! smallest value with at least `⌈q·n⌉` values at or below it (at least one). HDR histograms
//! answer `value_at_quantile` by the same rule (at their 3-significant-digit resolution), so a
//! P99 from [`quantile`] over raw values and one from a histogram agree.
//!
//! [`plot`] draws any experiment's figures (lines against a swept parameter, CDFs) as SVG.
//!
//! # Errors
//!
//! Every fallible function returns [`ReportError`]: a figure that cannot be drawn or written,
//! or a run's record that cannot be read.

mod error;
mod escape;
pub mod html;
pub mod plot;
pub mod run;
mod stats;

pub use error::ReportError;
pub use stats::{
    hist_quantile_us, new_histogram, quantile, quantile_sorted, record_duration, weighted_quantile,
};

use serde::Serialize;
use serde_json::{Map, Value};

/// One row of a report: column name → value (`null` prints as `-`).
pub type Row = Map<String, Value>;

/// A target from a paper or an issue, and what this run shows about it; or a figure reported
/// beside the targets, which has none to meet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// The target, in words (`none` for a reported figure).
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Met, missed, or only reported. In JSON: `"verdict": "met" | "missed" | "reported"`.
    pub verdict: Verdict,
}

/// What a run shows about a [`Check`]'s target. A reported figure is neither met nor missed:
/// every table and document says "reported", and it never fails a run. An inconclusive one is
/// neither either: the run's own baseline moved too much to judge the target (a noisy machine),
/// and a strict run fails on it as on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The target was met.
    Met,
    /// The target was missed.
    Missed,
    /// A figure shown for reference, with no target to meet.
    Reported,
    /// The target could not be judged: what it is measured against was not steady in this run.
    Inconclusive,
}

impl Verdict {
    /// [`Verdict::Met`] when `met`, [`Verdict::Missed`] otherwise.
    pub fn of(met: bool) -> Verdict {
        if met { Verdict::Met } else { Verdict::Missed }
    }

    /// The word tables print: `met`, `MISSED` (loud, as a failure should be), `reported` or
    /// `TOO NOISY` (loud too: nothing was shown either way).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Reported => "reported",
            Verdict::Inconclusive => "TOO NOISY",
        }
    }
}

/// The outcome of one experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The experiment, in words.
    pub experiment: String,
    /// Column order for tables.
    pub columns: Vec<String>,
    /// One object per row.
    pub rows: Vec<Row>,
    /// Targets and whether they were met.
    pub checks: Vec<Check>,
    /// Simulation events processed (simulated experiments only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
}

impl Report {
    /// A report with no events count (a real-device or LLM experiment).
    pub fn new(experiment: impl Into<String>, columns: Vec<String>, rows: Vec<Row>) -> Report {
        Report {
            experiment: experiment.into(),
            columns,
            rows,
            checks: Vec::new(),
            events: None,
        }
    }

    /// The same report with these checks.
    pub fn with_checks(self, checks: Vec<Check>) -> Report {
        Report { checks, ..self }
    }

    /// The report as one JSON document titled `title` (what `--json` prints).
    pub fn document(&self, title: &str) -> Value {
        let mut doc = Map::new();
        doc.insert("scenario".into(), Value::from(title));
        doc.insert("experiment".into(), Value::from(self.experiment.clone()));
        doc.insert("rows".into(), Value::from(self.rows.clone()));
        doc.insert(
            "checks".into(),
            serde_json::to_value(&self.checks).unwrap_or(Value::Null),
        );
        if let Some(events) = self.events {
            doc.insert("events".into(), Value::from(events));
        }
        Value::Object(doc)
    }

    /// How many checks have this verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }

    /// The line under a checks table: `2 of 3 targets met`, then `, 1 figure reported` when
    /// there are reported figures (they are no targets, so they count neither way), and
    /// `, 1 not judged: the machine was too noisy` when some could not be judged (they count
    /// among the targets, not among those met).
    pub fn summary(&self) -> String {
        let met = self.count(Verdict::Met);
        let noisy = self.count(Verdict::Inconclusive);
        let targets = met + self.count(Verdict::Missed) + noisy;
        let mut line = format!("{met} of {targets} targets met");
        match self.count(Verdict::Reported) {
            0 => {}
            1 => line.push_str(", 1 figure reported"),
            n => line.push_str(&format!(", {n} figures reported")),
        }
        if noisy > 0 {
            line.push_str(&format!(", {noisy} not judged: the machine was too noisy"));
        }
        line
    }

    /// Whether every target was met: none missed and none left unjudged (what `--strict` asks).
    pub fn all_met(&self) -> bool {
        self.count(Verdict::Missed) == 0 && self.count(Verdict::Inconclusive) == 0
    }
}

/// A row from a serializable struct (its fields, in order, become the columns).
pub fn row(r: impl Serialize) -> Row {
    match serde_json::to_value(r) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// A row from `(column, value)` pairs.
pub fn cells(cells: &[(&str, Value)]) -> Row {
    cells
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// Column names as owned strings.
pub fn columns(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}

/// The column names of the first row, in its order.
pub fn columns_of(rows: &[Row]) -> Vec<String> {
    rows.first()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default()
}

/// Round to one decimal (microsecond figures).
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Round to three decimals (ratios and fractions: stable, readable output).
pub fn round3(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    struct R {
        b: u32,
        a: Option<f64>,
    }

    #[test]
    fn rows_keep_field_order_and_columns_follow_the_first_row() {
        let rows = vec![row(R { b: 1, a: None }), cells(&[("b", json!(2))])];
        assert_eq!(columns_of(&rows), vec!["b", "a"]);
        assert_eq!(rows[0].get("a"), Some(&Value::Null));
    }

    #[test]
    fn the_document_carries_events_only_when_counted() {
        let mut r = Report::new("x", columns(&["b"]), vec![cells(&[("b", json!(1))])]);
        assert!(r.document("t").get("events").is_none());
        r.events = Some(7);
        let doc = r.document("t");
        assert_eq!(doc["events"], json!(7));
        assert_eq!(doc["scenario"], json!("t"));
        assert_eq!(doc["rows"][0]["b"], json!(1));
    }

    fn checked(verdicts: &[Verdict]) -> Report {
        let checks = verdicts
            .iter()
            .enumerate()
            .map(|(i, &verdict)| Check {
                name: format!("c{i}"),
                target: if verdict == Verdict::Reported {
                    "none".into()
                } else {
                    ">= 1".into()
                },
                measured: "1".into(),
                verdict,
            })
            .collect();
        Report::new("x", columns(&["b"]), Vec::new()).with_checks(checks)
    }

    #[test]
    fn a_reported_figure_is_written_as_reported_in_the_json_never_as_met() {
        let doc = checked(&[Verdict::Met, Verdict::Missed, Verdict::Reported]).document("t");
        let verdicts: Vec<&Value> = doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .map(|c| &c["verdict"])
            .collect();
        assert_eq!(
            verdicts,
            [&json!("met"), &json!("missed"), &json!("reported")]
        );
        assert!(
            doc["checks"][2].get("pass").is_none(),
            "no boolean that would call it passed: {doc}"
        );
    }

    #[test]
    fn reported_figures_count_neither_as_met_nor_as_missed() {
        let r = checked(&[Verdict::Met, Verdict::Reported, Verdict::Reported]);
        assert_eq!(r.count(Verdict::Missed), 0, "reported figures fail nothing");
        assert_eq!(r.summary(), "1 of 1 targets met, 2 figures reported");
        assert_eq!(
            checked(&[Verdict::Reported]).summary(),
            "0 of 0 targets met, 1 figure reported"
        );
        let missed = checked(&[Verdict::Missed, Verdict::Reported]);
        assert_eq!(missed.count(Verdict::Missed), 1);
        assert_eq!(missed.summary(), "0 of 1 targets met, 1 figure reported");
        assert_eq!(checked(&[Verdict::Met]).summary(), "1 of 1 targets met");
        assert_eq!(Verdict::Reported.word(), "reported");
        assert_eq!(Verdict::of(true), Verdict::Met);
        assert_eq!(Verdict::of(false).word(), "MISSED");
    }

    #[test]
    fn an_inconclusive_check_is_a_target_neither_met_nor_missed_and_fails_all_met() {
        let r = checked(&[Verdict::Met, Verdict::Inconclusive, Verdict::Reported]);
        assert_eq!(
            r.summary(),
            "1 of 2 targets met, 1 figure reported, 1 not judged: the machine was too noisy"
        );
        assert!(!r.all_met());
        assert!(checked(&[Verdict::Met, Verdict::Reported]).all_met());
        assert!(!checked(&[Verdict::Missed]).all_met());
        assert_eq!(
            r.document("t")["checks"][1]["verdict"],
            json!("inconclusive")
        );
        assert_eq!(Verdict::Inconclusive.word(), "TOO NOISY");
    }

    #[test]
    fn rounding() {
        assert_eq!(round1(1.26), 1.3);
        assert_eq!(round3(0.12345), 0.123);
    }
}
