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
    let out = llm(&data, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
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
    assert_eq!(
        llm(&data, &args).stdout,
        out.stdout,
        "same seed, same numbers"
    );
}

#[test]
fn an_unknown_model_lists_the_models() {
    let Some(data) = data_dir() else { return };
    let out = llm(&data, &["llm", "--model-filter", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gpt-4"), "{err}");
}

#[test]
fn predict_eval_reports_accuracy_and_latency() {
    let Some(data) = data_dir() else { return };
    let out = llm(
        &data,
        &["llm", "predict-eval", "--model-filter", "gpt-4", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
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
    let out = llm(&data, &[&base[..], &["--warm", "100"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let experiment = doc["experiment"].as_str().expect("experiment");
    assert!(
        experiment.contains("705 requests (100 more warm the history), azure-conv arrivals"),
        "{experiment}"
    );
    assert_eq!(doc["rows"].as_array().expect("rows").len(), 2);
    let out = llm(&data, &[&base[..], &["--warm", "805"]].concat());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--warm 805 leaves no requests"), "{err}");
}
