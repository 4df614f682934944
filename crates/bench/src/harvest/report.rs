//! The harvesting benchmark's report: a row per run of each driver (`collector`, `policy`,
//! `daemon`), and the targets for each driver's `slo-aware` rows against HP alone and
//! the baselines. Kept apart from the runs so that what is checked reads in one place.

use super::params::{AGAIN, Cooperative, HarvestParams, Measured, POLICIES};
use crate::stats::none;
use crate::{Check, Report};
use serde_json::json;
use std::time::Duration;
use xsched_report::{Verdict, cells, columns, quantile, round3};

fn row_of(
    driver: &str,
    policy: &str,
    slice: Option<Duration>,
    m: &Measured,
    slo: Duration,
) -> xsched_report::Row {
    cells(&[
        ("device", json!("cpu")),
        ("driver", json!(driver)),
        ("policy", json!(policy)),
        (
            "slice_us",
            slice.map_or(none(), |s| json!(round3(s.as_secs_f64() * 1e6))),
        ),
        ("hp_slo_attainment", json!(round3(m.attainment(slo)))),
        ("lp_throughput_norm", json!(round3(m.lp_norm()))),
        ("utilization", json!(round3(m.utilization()))),
        (
            "preempt_p99_us",
            json!(quantile(&m.hp.kernel_waits, 0.99).map(|d| round3(d.as_secs_f64() * 1e6))),
        ),
    ])
}

/// The targets for one driver's slo-aware row: attainment within 0.01 of HP alone, LP
/// at least twice the `priority` baseline's.
fn targets(
    what: &str,
    m: &Measured,
    alone: &Measured,
    again: Option<&Measured>,
    slo: Duration,
    prio: Option<&Measured>,
) -> Vec<Check> {
    let (a, a0) = (m.attainment(slo), alone.attainment(slo));
    let floor = again.map_or(String::new(), |g| {
        format!("; HP alone again: {:.3}", g.attainment(slo))
    });
    let mut checks = vec![Check {
        name: format!("cpu {what} attainment vs standalone"),
        target: "within 0.01".into(),
        measured: format!(
            "{a:.3} vs {a0:.3} (SLO {:.0} us{floor})",
            slo.as_secs_f64() * 1e6
        ),
        verdict: Verdict::of(a >= a0 - 0.01),
    }];
    if let Some(prio) = prio {
        let (lp, lp0) = (m.lp_norm(), prio.lp_norm());
        checks.push(Check {
            name: format!("cpu {what} LP vs priority"),
            target: ">= 2x priority".into(),
            measured: format!("{lp:.3} vs {lp0:.3} ({:.2}x)", lp / lp0.max(1e-9)),
            verdict: Verdict::of(lp >= 2.0 * lp0),
        });
    }
    checks
}

/// The report: the collector rows and checks, then the `policy` and `daemon` drivers'.
pub(super) fn report(
    p: &HarvestParams,
    coop: &[(Cooperative, Measured)],
    policies: &[(&str, Measured)],
    daemon: &[(&str, Measured)],
) -> Report {
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let prio = coop_row(coop, "priority");
    collector_part(p, coop, prio, &mut rows, &mut checks);
    let lp_kernel = p.slices.first().copied();
    for (driver, list) in [("policy", policies), ("daemon", daemon)] {
        driver_part(driver, list, lp_kernel, prio, &mut rows, &mut checks);
    }
    Report {
        experiment: "harvest (cpu device)".into(),
        columns: columns(&[
            "device",
            "driver",
            "policy",
            "slice_us",
            "hp_slo_attainment",
            "lp_throughput_norm",
            "utilization",
            "preempt_p99_us",
        ]),
        rows,
        checks,
        events: None,
    }
}

/// The measurement of the cooperative row named `name`, if it ran.
fn coop_row<'a>(coop: &'a [(Cooperative, Measured)], name: &str) -> Option<&'a Measured> {
    coop.iter().find(|(r, _)| r.name() == name).map(|(_, m)| m)
}

/// The collector rows, then each `slo-aware` row's targets and its LP against `timeslice`'s
/// (nothing without a `standalone` row, the SLO's reference).
fn collector_part(
    p: &HarvestParams,
    coop: &[(Cooperative, Measured)],
    prio: Option<&Measured>,
    rows: &mut Vec<xsched_report::Row>,
    checks: &mut Vec<Check>,
) {
    let again = coop_row(coop, AGAIN);
    let Some(alone) = coop_row(coop, "standalone") else {
        return;
    };
    let slo = alone.p99();
    for (r, m) in coop {
        let shown = match r {
            Cooperative::Timeslice => Some(p.lp_kernel),
            _ => r.slice(),
        };
        rows.push(row_of("collector", r.name(), shown, m, slo));
    }
    for (r, m) in coop
        .iter()
        .filter(|(r, _)| matches!(r, Cooperative::SloAware(_)))
    {
        let us = r.slice().map_or(0, |s| s.as_micros());
        checks.extend(targets(
            &format!("collector slo-aware ({us} us)"),
            m,
            alone,
            again,
            slo,
            prio,
        ));
        if let Some(ts) = coop_row(coop, "timeslice") {
            checks.push(Check {
                name: format!("cpu collector slo-aware ({us} us) LP vs timeslice"),
                target: "above".into(),
                measured: format!(
                    "{:.3} vs {:.3} (timeslice attainment {:.3})",
                    m.lp_norm(),
                    ts.lp_norm(),
                    ts.attainment(slo)
                ),
                verdict: Verdict::of(m.lp_norm() > ts.lp_norm()),
            });
        }
    }
}

/// One driver's rows (`policy` or `daemon`), then its `slo-aware` row's targets and, reported,
/// its figures beside `hpf`'s and `slo-aware:between-requests`' (nothing without a
/// `standalone` row).
fn driver_part(
    driver: &str,
    list: &[(&str, Measured)],
    lp_kernel: Option<Duration>,
    prio: Option<&Measured>,
    rows: &mut Vec<xsched_report::Row>,
    checks: &mut Vec<Check>,
) {
    let Some((_, alone)) = list.iter().find(|(n, _)| *n == "standalone") else {
        return;
    };
    let slo = alone.p99();
    for (name, m) in list {
        let slice = POLICIES.contains(name).then_some(lp_kernel).flatten();
        rows.push(row_of(driver, name, slice, m, slo));
    }
    let Some((_, m)) = list.iter().find(|(n, _)| *n == "slo-aware") else {
        return;
    };
    let again = list.iter().find(|(n, _)| *n == AGAIN).map(|(_, m)| m);
    checks.extend(targets(
        &format!("{driver} slo-aware"),
        m,
        alone,
        again,
        slo,
        prio,
    ));
    for other in ["hpf", "slo-aware:between-requests"] {
        if let Some((_, o)) = list.iter().find(|(n, _)| *n == other) {
            checks.push(Check {
                name: format!("cpu {driver} slo-aware vs {other}"),
                target: "none".into(),
                measured: format!(
                    "attainment {:.3} vs {:.3}, LP {:.3} vs {:.3}",
                    m.attainment(slo),
                    o.attainment(slo),
                    m.lp_norm(),
                    o.lp_norm()
                ),
                verdict: Verdict::Reported,
            });
        }
    }
}
