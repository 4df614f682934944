//! The real-device experiments run end to end with tiny parameters and produce well-formed
//! rows. Timings are not asserted here (two noisy cores); figures live in the docs' benchmark
//! record.

use std::time::Duration;
use xsched_bench::{cpu_share, daemon_rtt, fg_bg, harvest, overhead, preempt};
use xsched_core::Level;

fn no_progress(_: usize, _: usize) {}

fn number(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> f64 {
    row.get(key)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("{key} missing in {row:?}"))
}

#[test]
fn fg_bg_reports_every_mode_with_ratios() {
    let p = fg_bg::FgBgParams {
        requests: 12,
        rounds: 2,
        warmup: 2,
        fg_period: Duration::from_millis(4),
        levels: vec![Level::Block, Level::Interrupt],
        ..fg_bg::FgBgParams::default()
    };
    let report = fg_bg::run(&p, &no_progress).expect("runs");
    let modes: Vec<&str> = report
        .rows
        .iter()
        .map(|r| r["mode"].as_str().expect("mode"))
        .collect();
    assert_eq!(modes, ["standalone", "native", "xsched", "xsched"]);
    assert_eq!(number(&report.rows[0], "p99_ratio"), 1.0);
    for r in &report.rows {
        assert!(number(r, "p50_us") > 0.0 && number(r, "p99_us") >= number(r, "p50_us"));
    }
    assert_eq!(
        report.checks.len(),
        2,
        "the baseline's steadiness and the Level-3 target are checked"
    );
    let runs = report.rows[0]["p99_runs_ms"].as_str().expect("runs");
    assert_eq!(
        runs.split(' ').count(),
        2,
        "standalone measured in each round: {runs}"
    );
}

#[test]
fn preempt_reports_the_floor_and_each_point() {
    let p = preempt::PreemptParams {
        lengths: vec![Duration::from_micros(200)],
        samples: 8,
        ..preempt::PreemptParams::default()
    };
    let report = preempt::run(&p, &no_progress).expect("runs");
    assert_eq!(report.rows.len(), 1 + p.variants.len());
    assert_eq!(report.rows[0]["level"], "floor");
    for r in &report.rows[1..] {
        assert_eq!(number(r, "cmd_us"), 200.0);
        assert!(number(r, "p50_us") > 0.0);
    }
}

#[test]
fn overhead_and_cpu_share_report_their_rows() {
    let p = overhead::OverheadParams {
        commands: 40,
        thresholds: vec![1, 8],
        repeats: 1,
        submit_samples: 200,
        ..overhead::OverheadParams::default()
    };
    let report = overhead::run(&p, &no_progress).expect("runs");
    assert_eq!(
        report.rows.len(),
        5,
        "two thresholds, two defaults, the submit call"
    );
    assert!(number(&report.rows[0], "direct_ms") > 0.0);

    let p = cpu_share::CpuShareParams {
        phase: Duration::from_millis(200),
        ..cpu_share::CpuShareParams::default()
    };
    let report = cpu_share::run(&p, &no_progress).expect("Linux exposes schedstat");
    assert_eq!(report.rows.len(), 2);
    assert!(number(&report.rows[1], "commands_per_s") > 1000.0);
}

#[test]
fn daemon_round_trip_reports_the_floor_the_daemon_and_its_cpu() {
    let p = daemon_rtt::DaemonRttParams {
        samples: 20,
        phase: Duration::from_millis(200),
        ..daemon_rtt::DaemonRttParams::default()
    };
    let report = daemon_rtt::run(&p, &no_progress).expect("runs");
    assert_eq!(report.rows.len(), 3);
    assert!(number(&report.rows[0], "p50_us") > 0.0);
    assert!(number(&report.rows[1], "p50_us") > 0.0);
}

#[test]
fn multi_device_reports_four_modes() {
    let p = xsched_bench::multi_device::MultiDeviceParams {
        requests: 5,
        period: Duration::from_millis(5),
        ..xsched_bench::multi_device::MultiDeviceParams::default()
    };
    let report = xsched_bench::multi_device::run(&p, &no_progress).expect("runs");
    let modes: Vec<&str> = report
        .rows
        .iter()
        .map(|r| r["mode"].as_str().expect("mode"))
        .collect();
    assert_eq!(modes, ["standalone", "native", "xsched", "xsched"]);
    assert_eq!(report.rows[3]["policy"], "hpf-global");
}

#[test]
fn harvest_reports_every_policy_and_lp_runs_only_beside_hp() {
    let mut p = harvest::HarvestParams {
        warmup: 2,
        slices: vec![Duration::from_micros(200)],
        ..harvest::HarvestParams::default()
    };
    p.shape.requests = 12;
    let report = harvest::run(&p, &no_progress).expect("runs");
    let rows: Vec<(&str, &str)> = report
        .rows
        .iter()
        .map(|r| {
            (
                r["driver"].as_str().expect("driver"),
                r["policy"].as_str().expect("policy"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("collector", "standalone"),
            ("collector", "timeslice"),
            ("collector", "priority"),
            ("collector", "standalone (again)"),
            ("collector", "slo-aware"),
            ("policy", "standalone"),
            ("policy", "standalone (again)"),
            ("policy", "hpf"),
            ("policy", "slo-aware:between-requests"),
            ("policy", "slo-aware"),
        ]
    );
    for r in &report.rows {
        let a = number(r, "hp_slo_attainment");
        assert!((0.0..=1.0).contains(&a), "{r:?}");
        assert!(number(r, "utilization") > 0.0, "{r:?}");
        if r["policy"]
            .as_str()
            .is_some_and(|p| p.starts_with("standalone"))
        {
            assert_eq!(number(r, "lp_throughput_norm"), 0.0, "HP alone: {r:?}");
        }
    }
    assert!(
        number(&report.rows[1], "lp_throughput_norm") > 0.0,
        "timeslice runs LP"
    );
    assert!(
        number(&report.rows[7], "lp_throughput_norm") > 0.0,
        "hpf lets LP run while HP is idle"
    );
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("policy slo-aware attainment")),
        "{names:?}"
    );
    // Both attainment targets state the noise floor beside them.
    let floors = report
        .checks
        .iter()
        .filter(|c| c.name.contains("attainment") && c.measured.contains("HP alone again"))
        .count();
    assert_eq!(floors, 2, "{:?}", report.checks);
}
