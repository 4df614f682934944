//! The adoption path on one real conflict: the demo's foreground requests beside its
//! saturating background, run natively and then in each rollout mode (`observe`,
//! `cooperative`, `preemptive`), with every queue's accounting side by side.
//!
//! What observe mode measures predicts what the other modes change: it launches exactly as a
//! native run does, so its foreground `waiting` (latency less device time) is the time the
//! urgent queue spent behind the background's commands in the device's one FIFO, which is the
//! most preemption can take away; cooperative and preemptive then show how much of it each
//! level does remove, and what the background pays (its preemptions, the time it was held).
//!
//! The run also keeps, for `xsched report`, each queue's latency CDF and its states sampled
//! every millisecond ([`AdoptParams::sample_every`]).

use crate::error::BenchError;
use crate::fg_bg::{self, FgBgParams, RunResult};
use crate::stats::pct_us;
use crate::{Check, Report};
use serde_json::{Map, Value, json};
use std::time::Duration;
use xsched_core::{Hint, Nanos};
use xsched_report::run::{self, QueueRecord, QueueStateKind, RunGroup, RunRecord};
use xsched_report::{Verdict, cells, columns, round1, round3};
use xsched_runtime::{QueueAccount, QueueOptions, QueueState, RolloutMode};

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct AdoptParams {
    /// The workload (the demo's).
    pub workload: FgBgParams,
    /// The foreground's SLO (its misses are counted; the policy is fixed priority).
    pub slo: Duration,
    /// How often the queues' states are sampled for the timeline.
    pub sample_every: Duration,
}

impl Default for AdoptParams {
    /// The demo's workload with 300 measured requests per mode (about 3 s each), a 5 ms SLO
    /// (2.5 times a request's 2 ms of kernels) and 1 ms state samples.
    fn default() -> Self {
        AdoptParams {
            workload: FgBgParams {
                requests: 300,
                ..FgBgParams::default()
            },
            slo: Duration::from_millis(5),
            sample_every: Duration::from_millis(1),
        }
    }
}

/// The configurations, in rollout order.
const CONFIGS: [Option<RolloutMode>; 4] = [
    None,
    Some(RolloutMode::Observe),
    Some(RolloutMode::Cooperative),
    Some(RolloutMode::Preemptive),
];

fn config_name(mode: Option<RolloutMode>) -> &'static str {
    mode.map_or("native", RolloutMode::name)
}

/// Run natively and in every mode; the table, and the record for `xsched report`.
pub fn run(
    p: &AdoptParams,
    progress: &dyn Fn(usize, usize),
) -> Result<(Report, RunRecord), BenchError> {
    let workload = FgBgParams {
        timeline: Some(p.sample_every),
        ..p.workload.clone()
    };
    let slo = Hint::Slo(Nanos::from_us(p.slo.as_micros() as u64));
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    let mut fg_waiting = Vec::new();
    for (i, &mode) in CONFIGS.iter().enumerate() {
        progress(i, CONFIGS.len());
        let (fg, bg) = match mode {
            None => (QueueOptions::native(), QueueOptions::native()),
            Some(m) => (
                m.apply(QueueOptions::default().with_hint(Hint::Priority(1))?),
                m.apply(QueueOptions::default().with_hint(Hint::Priority(0))?),
            ),
        };
        let r = fg_bg::run_options(&workload, fg.with_hint(slo)?, Some(bg))?;
        let name = config_name(mode);
        fg_waiting.push((
            name,
            per_command_us(r.fg_account.waiting(), r.fg_account.completed),
        ));
        for (queue, account, latency) in queues(&r) {
            let mut row = cells(&[
                ("mode", json!(name)),
                ("queue", json!(queue)),
                (
                    "p99_us",
                    latency.map_or(Value::Null, |h| json!(pct_us(h, 0.99))),
                ),
            ]);
            row.extend(account_cells(&account));
            rows.push(row);
        }
        groups.push(group(name, &r));
    }
    progress(CONFIGS.len(), CONFIGS.len());
    let mut checks = Vec::new();
    if let [(_, native), (_, observe), _, (_, preemptive)] = fg_waiting[..] {
        checks.push(Check {
            name: "preemption removes most of the wait observe mode measured".into(),
            target: "preemptive fg wait per command < 1/2 of observe's".into(),
            measured: format!(
                "native {native:.0} us, observe {observe:.0} us, preemptive {preemptive:.0} us"
            ),
            verdict: Verdict::of(preemptive < observe / 2.0),
        });
    }
    let mut names = vec!["mode", "queue", "p99_us"];
    names.extend(ACCOUNT_COLUMNS);
    let report = Report {
        experiment: "adopt: native, observe, cooperative, preemptive (cpu device)".into(),
        columns: columns(&names),
        rows,
        checks,
        events: None,
    };
    let record = RunRecord {
        title: "xsched adoption path: the fg/bg demo natively and in each mode".into(),
        machine: machine(),
        groups,
    };
    Ok((report, record))
}

/// Each queue of a run: its name, accounting and (the foreground's) latency.
fn queues(
    r: &RunResult,
) -> Vec<(
    &'static str,
    QueueAccount,
    Option<&hdrhistogram::Histogram<u64>>,
)> {
    let mut q = vec![("foreground", r.fg_account, Some(&r.latency))];
    if let Some(bg) = r.bg_account {
        q.push(("background", bg, None));
    }
    q
}

/// The accounting columns, in order.
const ACCOUNT_COLUMNS: [&str; 13] = [
    "completed",
    "device_ms",
    "device_time",
    "wait_us_per_cmd",
    "queue_wait_us_per_cmd",
    "queue_wait_max_ms",
    "max_in_flight",
    "slo_misses",
    "preemptions",
    "held_ms",
    "preempt_cost_us",
    "interrupts",
    "cancelled",
];

fn account_cells(a: &QueueAccount) -> Map<String, Value> {
    let values = [
        json!(a.completed),
        json!(round1(ms(a.device_time))),
        json!(if a.device_time_measured {
            "measured"
        } else {
            "estimated"
        }),
        json!(round1(per_command_us(a.waiting(), a.completed))),
        json!(round1(per_command_us(a.queue_wait, a.launched))),
        json!(round3(ms(a.queue_wait_max))),
        json!(a.max_in_flight),
        json!(a.latency_misses),
        json!(a.preemptions),
        json!(round1(ms(a.suspended))),
        json!(round1(a.preemption_cost.as_secs_f64() * 1e6)),
        json!(a.interrupts),
        json!(a.cancelled),
    ];
    ACCOUNT_COLUMNS
        .iter()
        .map(|k| (*k).to_string())
        .zip(values)
        .collect()
}

/// `total` over `n` commands, in µs each (0 for none).
fn per_command_us(total: Duration, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        total.as_secs_f64() * 1e6 / n as f64
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One configuration's queues for the record.
fn group(name: &str, r: &RunResult) -> RunGroup {
    let end = r.timeline.last().map_or(0.0, |s| ms(s.at));
    let states = |state: &dyn Fn(&fg_bg::QueueSample) -> Option<QueueState>| {
        let samples: Vec<(f64, QueueStateKind)> = r
            .timeline
            .iter()
            .filter_map(|s| state(s).map(|q| (ms(s.at), kind(&q))))
            .collect();
        run::spans(&samples, end)
    };
    let fg_states = states(&|s| Some(s.fg));
    let bg_states = states(&|s| s.bg);
    let queues = queues(r)
        .into_iter()
        .zip([fg_states, bg_states])
        .map(|((queue, account, latency), states)| QueueRecord {
            name: queue.into(),
            latency_cdf_us: latency.map(run::cdf_us).unwrap_or_default(),
            states,
            account: account_cells(&account),
        })
        .collect();
    RunGroup {
        name: name.into(),
        queues,
    }
}

fn kind(q: &QueueState) -> QueueStateKind {
    QueueStateKind::of(q.pending + q.in_flight > 0, q.suspended)
}

/// The CPU model and core count.
fn machine() -> String {
    format!(
        "{}; the built-in CPU device with one worker",
        xsched_probe::machine()
    )
}
