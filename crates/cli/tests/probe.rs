//! `xsched probe` end to end on the CPU device: it writes its table (JSON and markdown), keeps
//! it where `xsched devices` shows it, and `--compare` flags a regression in a doctored table
//! (and only there); bad input is an error that names it.

use std::path::Path;
use std::process::{Command, Output};

/// `xsched args` with its cache in `cache` (never the user's own).
fn xsched(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(args)
        .env("XSCHED_CACHE_DIR", cache)
        .output()
        .expect("xsched runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A quick probe of the CPU device into `dir`; its table.
fn quick_probe(dir: &Path) -> serde_json::Value {
    let out = xsched(
        dir,
        &[
            "probe",
            "--backend",
            "cpu",
            "--samples",
            "5",
            "--lengths-us",
            "100,400",
            "--out",
            dir.to_str().expect("utf-8 path"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(dir.join("probe.json")).expect("probe.json");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn a_probe_covers_every_cpu_level_and_devices_shows_it() {
    let dir = tempfile::tempdir().expect("dir");
    let table = quick_probe(dir.path());
    let cpu = &table["backends"][0];
    assert_eq!(cpu["backend"], "cpu");
    assert!(
        cpu["runtime"].as_str().is_some_and(|r| r.contains("Linux")),
        "{cpu}"
    );
    let levels: Vec<u64> = cpu["levels"]
        .as_array()
        .expect("levels")
        .iter()
        .filter_map(|l| l["level"].as_u64())
        .collect();
    assert_eq!(levels, [1, 2, 3]);
    for l in cpu["levels"].as_array().expect("levels") {
        let points = l["latency"].as_array().expect("latency");
        assert_eq!(points.len(), 2, "one point per length");
        for p in points {
            let (p50, p99, max) = (
                p["p50_us"].as_f64(),
                p["p99_us"].as_f64(),
                p["max_us"].as_f64(),
            );
            assert!(p50 > Some(0.0) && p50 <= p99 && p99 <= max, "{p}");
        }
    }
    assert_eq!(
        cpu["levels"][2]["state_kept"], true,
        "Level 3 keeps progress"
    );
    assert!(
        cpu["levels"][0]["state_kept"].is_null(),
        "nothing stopped at Level 1"
    );
    let md = std::fs::read_to_string(dir.path().join("probe.md")).expect("probe.md");
    assert!(
        md.contains("**cpu**: built-in CPU device") && md.contains("P99.9"),
        "{md}"
    );
    // Kept for `xsched devices`, which shows it beside the capability table.
    let out = xsched(dir.path(), &["devices", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let devices: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(devices[0]["key"], "cpu");
    assert_eq!(devices[0]["probe"]["levels"], cpu["levels"]);
}

#[test]
fn compare_flags_the_figures_a_doctored_table_made_worse_and_nothing_else() {
    let dir = tempfile::tempdir().expect("dir");
    let mut table = quick_probe(dir.path());
    let original = dir.path().join("probe.json");
    // Doctor: Level 3's P99 at 100 us ten times worse, and its state no longer kept.
    let l3 = &mut table["backends"][0]["levels"][2];
    let p99 = l3["latency"][0]["p99_us"].as_f64().expect("p99");
    l3["latency"][0]["p99_us"] = serde_json::json!(p99 * 10.0 + 1000.0);
    l3["state_kept"] = serde_json::json!(false);
    let doctored = dir.path().join("doctored.json");
    std::fs::write(&doctored, table.to_string()).expect("write");
    let path = |p: &Path| p.to_str().expect("utf-8").to_string();

    let out = xsched(
        dir.path(),
        &[
            "probe",
            "--compare",
            &path(&original),
            "--table",
            &path(&doctored),
        ],
    );
    assert!(!out.status.success(), "a regression fails the command");
    let err = stderr(&out);
    assert!(err.contains("2 figure(s) regressed"), "{err}");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("cpu built-in CPU device (one worker) L3 cmd 100 us p99"),
        "{shown}"
    );
    assert!(shown.contains("L3 state kept"), "{shown}");
    assert!(
        !shown.contains("L1") && !shown.contains("L2"),
        "only what changed: {shown}"
    );

    // The other way round it is an improvement: nothing to flag.
    let out = xsched(
        dir.path(),
        &[
            "probe",
            "--compare",
            &path(&doctored),
            "--table",
            &path(&original),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no figure regressed"));
}

#[test]
fn a_malformed_probe_file_is_an_error_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let bad = dir.path().join("bad.json");
    for (text, names) in [
        (
            "{\"format\": 1,\n \"taken_unix_s\": \"yesterday\"}",
            "line 2",
        ),
        ("{\"format\": 1, \"surprise\": true}", "surprise"),
        ("not json", "probe table"),
    ] {
        std::fs::write(&bad, text).expect("write");
        let out = xsched(
            dir.path(),
            &[
                "probe",
                "--compare",
                bad.to_str().expect("utf-8"),
                "--table",
                bad.to_str().expect("utf-8"),
            ],
        );
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("bad.json") && err.contains(names),
            "{text}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one-line cause chain: {err}");
    }
}

#[test]
fn absent_backends_and_nonsense_thresholds_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let out = xsched(dir.path(), &["probe", "--backend", "cuda"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--backend cuda"), "{err}");
    for bad in ["-1", "NaN", "lots"] {
        let out = xsched(
            dir.path(),
            &[
                "probe",
                "--compare",
                "old.json",
                &format!("--threshold={bad}"),
            ],
        );
        assert!(!out.status.success(), "{bad}");
        assert!(
            stderr(&out).contains("--threshold"),
            "{bad}: {}",
            stderr(&out)
        );
    }
    let out = xsched(dir.path(), &["probe", "--lengths-us", "0"]);
    assert!(!out.status.success(), "a zero-length command sweep");
    let out = xsched(dir.path(), &["probe", "--samples", "0"]);
    assert!(!out.status.success(), "no samples");
    let out = xsched(dir.path(), &["probe", "--threshold", "0.2"]);
    assert!(
        !out.status.success(),
        "a threshold without --compare is not ignored"
    );
    assert!(stderr(&out).contains("--compare"), "{}", stderr(&out));
}
