//! What a run recorded about its queues, for `xsched report RUN.json -o report.html`: per queue,
//! its latency distribution, a timeline of its states and its accounting, grouped by the
//! configuration (mode, policy, ...) the queues ran under. Benchmarks write it
//! (`xsched bench adopt --record RUN.json`); [`crate::html`] draws it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One run: its configurations, each with its queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// What ran.
    pub title: String,
    /// Where it ran (CPU model and core count, device, ...).
    pub machine: String,
    /// One group per configuration, in the order they ran.
    pub groups: Vec<RunGroup>,
}

/// The queues of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunGroup {
    /// The configuration (for example `observe`).
    pub name: String,
    /// Its queues.
    pub queues: Vec<QueueRecord>,
}

/// One queue of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueRecord {
    /// The queue's name (`foreground`, `background`, ...).
    pub name: String,
    /// Its latency distribution as `(latency in µs, fraction of requests at most that)` in
    /// increasing order; empty when the queue's latency was not measured.
    pub latency_cdf_us: Vec<(f64, f64)>,
    /// Its states over the run, as consecutive spans.
    pub states: Vec<StateSpan>,
    /// Its accounting, figure by figure, in display order (names carry their unit).
    pub account: Map<String, Value>,
}

/// A span of time a queue spent in one state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSpan {
    /// Start, in ms from the run's start.
    pub from_ms: f64,
    /// End, in ms.
    pub to_ms: f64,
    /// The state.
    pub state: QueueStateKind,
}

/// What a queue was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueStateKind {
    /// It had work and was allowed to launch.
    Running,
    /// It had work and the scheduler held it.
    Suspended,
    /// It had no work.
    Idle,
}

impl QueueStateKind {
    /// The state of a queue with `work` (pending or in flight), `suspended` or not.
    pub fn of(work: bool, suspended: bool) -> QueueStateKind {
        match (work, suspended) {
            (false, _) => QueueStateKind::Idle,
            (true, true) => QueueStateKind::Suspended,
            (true, false) => QueueStateKind::Running,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            QueueStateKind::Running => "running",
            QueueStateKind::Suspended => "suspended",
            QueueStateKind::Idle => "idle",
        }
    }
}

/// Samples `(time in ms, state)` in time order merged into spans (each sample's state lasts
/// until the next sample; the last one ends at `end_ms`).
pub fn spans(samples: &[(f64, QueueStateKind)], end_ms: f64) -> Vec<StateSpan> {
    let mut out: Vec<StateSpan> = Vec::new();
    for (i, &(at, state)) in samples.iter().enumerate() {
        let to = samples.get(i + 1).map_or(end_ms.max(at), |s| s.0);
        match out.last_mut() {
            Some(last) if last.state == state => last.to_ms = to,
            _ => out.push(StateSpan {
                from_ms: at,
                to_ms: to,
                state,
            }),
        }
    }
    out
}

/// The CDF points of a latency histogram (ns): percentiles 1..=99, then 99.9 and the maximum.
pub fn cdf_us(hist: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if hist.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<(f64, f64)> = (1..100)
        .map(|p| f64::from(p) / 100.0)
        .chain([0.999])
        .map(|q| (hist.value_at_quantile(q) as f64 / 1e3, q))
        .collect();
    points.push((hist.max() as f64 / 1e3, 1.0));
    points
}

/// Read a record from JSON text; the error names the line and column, and the field.
pub fn parse(text: &str) -> Result<RunRecord, crate::ReportError> {
    Ok(serde_json::from_str(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_merge_into_spans() {
        use QueueStateKind::*;
        let s = spans(
            &[
                (0.0, Idle),
                (1.0, Running),
                (2.0, Running),
                (3.0, Suspended),
            ],
            5.0,
        );
        let got: Vec<_> = s.iter().map(|s| (s.from_ms, s.to_ms, s.state)).collect();
        assert_eq!(
            got,
            vec![(0.0, 1.0, Idle), (1.0, 3.0, Running), (3.0, 5.0, Suspended)]
        );
        assert!(spans(&[], 1.0).is_empty());
    }

    #[test]
    fn a_cdf_rises_to_one_at_the_maximum() {
        let mut h = crate::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).expect("in range");
        }
        let c = cdf_us(&h);
        assert_eq!(c.last().map(|p| p.1), Some(1.0));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert!(
            (c[49].0 - 500.0).abs() < 1.0,
            "P50 of 1..1000 us: {:?}",
            c[49]
        );
    }

    #[test]
    fn a_malformed_record_names_the_field_and_line() {
        let err =
            parse("{\n \"title\": \"x\",\n \"machine\": \"m\",\n \"groups\": [{\"name\": 3}]\n}")
                .expect_err("name must be a string");
        let msg = err.to_string();
        assert!(msg.contains("line 4"), "{msg}");
        let err = parse("{\"title\": \"x\", \"machine\": \"m\", \"groups\": [], \"extra\": 1}")
            .expect_err("unknown field");
        assert!(err.to_string().contains("extra"), "{err}");
    }
}
