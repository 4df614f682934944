//! `xsched llm replay`: a recorded request sequence through the engine simulator under each
//! policy, in either place of the order; bad lines refused with the line named.

use std::process::Command;

fn replay(file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(["llm", "replay", "--requests"])
        .arg(file)
        .args(extra)
        .output()
        .expect("xsched runs")
}

/// A successful replay's JSON lines, one per policy.
fn runs(out: &std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_recorded_burst_replays_under_each_policy_and_the_oracle_gains() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("requests.jsonl");
    // 24 requests within 0.24 s, answers of 150, 10 and 60 tokens in turn.
    let lines: Vec<String> = (0..24)
        .map(|i| {
            let out = [150, 10, 60][i % 3];
            format!(
                r#"{{"arrival": {}, "prompt": "question {i}", "input_tokens": 40, "output_tokens": {out}}}"#,
                0.01 * i as f64
            )
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    for order_at in ["engine", "gateway"] {
        let runs = runs(&replay(
            &file,
            &["--policy", "fcfs,sagesched-oracle", "--order-at", order_at],
        ));
        assert_eq!(runs.len(), 2);
        assert!(
            runs.iter()
                .all(|r| r["completed"] == 24 && r["ttlt"].as_array().map(Vec::len) == Some(24))
        );
        let mean = |k: usize| runs[k]["mean_ttlt"].as_f64().expect("mean");
        assert!(
            mean(1) < 0.9 * mean(0),
            "{order_at}: oracle {} fcfs {}",
            mean(1),
            mean(0)
        );
    }
}

#[test]
fn a_bad_line_is_refused_with_its_number() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("requests.jsonl");
    std::fs::write(
        &file,
        "{\"arrival\": 0, \"input_tokens\": 5, \"output_tokens\": 5}\n{\"arrival\": -1, \"input_tokens\": 5, \"output_tokens\": 5}\n",
    )
    .expect("write");
    let out = replay(&file, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("arrival"), "{err}");
    std::fs::write(
        &file,
        "{\"arrival\": 0, \"input_tokens\": \"x\", \"output_tokens\": 5}\n",
    )
    .expect("write");
    let err = String::from_utf8_lossy(&replay(&file, &[]).stderr).into_owned();
    assert!(
        err.contains("line 1") && err.contains("input_tokens"),
        "{err}"
    );
}

#[test]
fn a_step_time_fitted_elsewhere_replaces_the_presets_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("requests.jsonl");
    std::fs::write(
        &file,
        "{\"arrival\": 0, \"input_tokens\": 40, \"output_tokens\": 5}\n",
    )
    .expect("write");
    let mean = |step: &str| {
        let out = replay(&file, &["--policy", "fcfs", "--step-us", step]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        v["mean_ttlt"].as_f64().expect("mean")
    };
    // A step of a fixed length: one request's answer takes the same number of steps either way.
    let (short, long) = (mean("10000,0,0"), mean("20000,0,0"));
    assert!(
        short > 0.0 && (long / short - 2.0).abs() < 1e-9,
        "{short} {long}"
    );
    for bad in ["1,2", "1,-2,3", "1,x,3", "1,2,inf"] {
        let out = replay(&file, &["--step-us", bad]);
        assert!(!out.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--step-us"), "{bad}: {err}");
    }
}

#[test]
fn a_fit_to_a_measured_mean_sets_the_attention_term_and_a_bad_target_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("requests.jsonl");
    let lines: Vec<String> = (0..12)
        .map(|i| {
            format!(
                r#"{{"arrival": {}, "input_tokens": 300, "output_tokens": {}}}"#,
                0.2 * i as f64,
                80 + 40 * (i % 4)
            )
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let preset = runs(&replay(&file, &["--policy", "fcfs"]));
    let target = 1.5 * preset[0]["mean_ttlt"].as_f64().expect("mean");
    let fitted = runs(&replay(
        &file,
        &[
            "--policy",
            "fcfs,sagesched-oracle",
            "--fit-mean-ttlt",
            &format!("fcfs={target}"),
        ],
    ));
    let fit = &fitted[0]["fit"];
    assert_eq!(fit["reached"], true, "{fit}");
    assert!(fit["attend_us"].as_f64().expect("β3") > 0.0, "{fit}");
    let mean = fitted[1]["mean_ttlt"].as_f64().expect("mean");
    assert!((mean / target - 1.0).abs() < 0.005, "{mean} vs {target}");
    assert_eq!(fitted.len(), 3, "the fit, then each policy");
    for bad in ["fcfs=-2", "fcfs", "nonsense=3"] {
        let out = replay(&file, &["--fit-mean-ttlt", bad]);
        assert!(!out.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--fit-mean-ttlt"), "{bad}: {err}");
    }
}
