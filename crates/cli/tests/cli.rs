//! The binary end to end: demo JSON rows (CPU device and simulated), a scenario error's exit
//! status and message, the device list.

use std::process::Command;

fn xsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(args)
        .output()
        .expect("xsched runs")
}

/// An unknown policy is refused by every command that takes one with the core's own error, which
/// lists the known policies: the same words as from `XSCHED_POLICY` and the daemon's frame.
#[test]
fn an_unknown_policy_gets_the_same_error_everywhere() {
    let unknown = "nope"
        .parse::<xsched_core::PolicySpec>()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(unknown.contains("known: fcfs"), "{unknown}");
    for args in [
        &[
            "serve",
            "--policy",
            "nope",
            "--socket",
            "/nonexistent/x.sock",
        ][..],
        &["policy", "set", "nope", "--socket", "/nonexistent/x.sock"][..],
    ] {
        let out = xsched(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted an unknown policy");
        assert!(err.contains(&unknown), "{args:?}: {err}");
    }
}

/// The JSON document a successful run printed.
fn document(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// The rows of a CPU demo run with `args`, checked for the common shape: standalone, native,
/// then xsched at Levels 1, 2, 3, each with positive percentiles and ratio.
fn cpu_demo_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let out = xsched(args);
    let doc = document(&out);
    let rows = doc["rows"].as_array().expect("rows").clone();
    let modes: Vec<&str> = rows.iter().filter_map(|r| r["mode"].as_str()).collect();
    assert_eq!(
        modes,
        ["standalone", "native", "xsched", "xsched", "xsched"]
    );
    let levels: Vec<u64> = rows.iter().filter_map(|r| r["level"].as_u64()).collect();
    assert_eq!(levels, [1, 2, 3]);
    for r in &rows {
        for key in ["p50_us", "p99_us", "p99_ratio"] {
            assert!(r[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {r}");
        }
    }
    rows
}

#[test]
fn cpu_demo_json_rows_carry_mode_level_and_percentiles() {
    cpu_demo_rows(&["demo", "--json", "--requests", "8"]);
}

#[test]
fn two_process_demo_has_the_same_rows() {
    let rows = cpu_demo_rows(&["demo", "--processes", "--json", "--requests", "8"]);
    let native_share = rows[1]["bg_device_share"].as_f64().expect("share");
    assert!(native_share > 0.0, "the background process ran");
}

#[test]
fn harvest_through_the_daemon_runs_two_processes_under_each_policy() {
    let out = xsched(&["bench", "harvest-daemon", "--samples", "10", "--json"]);
    let doc = document(&out);
    let rows = doc["rows"].as_array().expect("rows");
    let daemon: Vec<&str> = rows
        .iter()
        .filter(|r| r["driver"] == "daemon")
        .filter_map(|r| r["policy"].as_str())
        .collect();
    assert_eq!(
        daemon,
        [
            "standalone",
            "standalone (again)",
            "hpf",
            "slo-aware:between-requests",
            "slo-aware"
        ]
    );
    let hpf = rows
        .iter()
        .find(|r| r["driver"] == "daemon" && r["policy"] == "hpf")
        .expect("hpf row");
    assert!(
        hpf["lp_throughput_norm"].as_f64().is_some_and(|v| v > 0.0),
        "the LP process ran: {hpf}"
    );
}

#[test]
fn bench_rejects_an_unknown_name() {
    let out = xsched(&["bench", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preempt"), "lists the benchmarks: {err}");
}

#[test]
fn simulated_demo_json_has_the_three_modes() {
    let out = xsched(&["demo", "--json", "--device", "npu3720"]);
    let doc = document(&out);
    let rows = doc["rows"].as_array().expect("rows");
    for mode in ["standalone", "native", "xsched"] {
        assert!(rows.iter().any(|r| r["mode"] == mode), "no {mode} row");
    }
    for r in rows {
        assert!(r["p99_us"].as_f64().is_some_and(|v| v > 0.0), "{r}");
    }
}

#[test]
fn bad_scenario_fails_with_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("xsched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "experiment = \"overhead\"\nthresholds = [4]\nwarp = 9\n",
    )
    .expect("write");
    let out = xsched(&["sim", file.to_str().expect("utf-8 path")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:3:") && err.contains("warp"), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line cause chain: {err}");
}

#[test]
fn devices_reports_opencl_absent_without_an_opencl_platform() {
    // ocl-icd reads its vendor list from OCL_ICD_VENDORS: an empty folder is a machine with the
    // loader but no OpenCL implementation.
    let empty = std::env::temp_dir().join(format!("xsched-no-icd-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("dir");
    let out = Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(["devices", "--json"])
        .env("OCL_ICD_VENDORS", &empty)
        .output()
        .expect("xsched runs");
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let opencl: Vec<_> = doc
        .as_array()
        .expect("array")
        .iter()
        .filter(|d| d["backend"] == "opencl")
        .collect();
    assert_eq!(opencl.len(), 1, "{opencl:?}");
    assert_eq!(opencl[0]["available"], false);
    assert!(
        opencl[0]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("absent"))
    );
    assert_eq!(opencl[0]["capabilities"]["max_level"], 1);
}

#[test]
fn devices_reports_cuda_absent_without_a_driver_and_never_panics() {
    // With no libcuda on the library path (this machine, CI), the CUDA row says absent; with a
    // driver (a GPU machine) each device is listed, at Level 1 or 2.
    let out = xsched(&["devices", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let cuda: Vec<_> = doc
        .as_array()
        .expect("array")
        .iter()
        .filter(|d| d["backend"] == "cuda")
        .collect();
    assert!(!cuda.is_empty());
    for d in &cuda {
        if d["available"] == false {
            assert_eq!(cuda.len(), 1, "{cuda:?}");
            assert!(d["name"].as_str().is_some_and(|n| n.starts_with("absent")));
        }
        let level = d["capabilities"]["max_level"].as_u64();
        assert!(level == Some(1) || level == Some(2), "{d}");
    }
}

#[test]
fn devices_lists_the_cpu_backend_and_ten_simulated_profiles() {
    let out = xsched(&["devices", "--json"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let list = doc.as_array().expect("array");
    assert_eq!(list[0]["backend"], "cpu");
    let opencl = list.iter().filter(|d| d["backend"] == "opencl").count();
    assert!(opencl >= 1, "OpenCL is listed, present or absent");
    let cuda = list.iter().filter(|d| d["backend"] == "cuda").count();
    assert!(cuda >= 1, "CUDA is listed, present or absent");
    assert_eq!(list.len(), 11 + opencl + cuda);
    assert_eq!(list[0]["capabilities"]["max_level"], 3);
    let sims = list.iter().filter(|d| d["backend"] == "sim").count();
    assert_eq!(sims, 10);
    assert!(
        list.iter()
            .all(|d| d["capabilities"]["max_level"].as_u64().is_some())
    );
}

#[test]
fn sim_plot_writes_the_case_studys_figure() {
    let dir = std::env::temp_dir().join(format!("xsched-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = dir.join("ai-pc.toml");
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(&scenario, "experiment = \"case-ai-pc\"\nseconds = 6\n").expect("scenario");
    let plots = dir.join("plots");
    let out = xsched(&[
        "sim",
        scenario.to_str().expect("utf-8 path"),
        "--plot",
        plots.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(plots.join("case-ai-pc-frame-interval-cdf.svg"))
        .expect("the figure");
    assert!(
        svg.contains("laxity") && svg.contains("fcfs"),
        "one curve per policy"
    );
    assert_eq!(document(&out)["rows"].as_array().map(Vec::len), Some(4));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each command fails, its error saying the given words.
fn refused_with_reasons(cases: &[(&[&str], &str)]) {
    for (args, says) in cases {
        let out = xsched(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The prompts a load sends, printed for scripts: a small ShareGPT file of our own, so the
/// test needs no dataset.
#[test]
fn llm_prompts_prints_what_a_load_sends_and_refuses_an_empty_choice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sharegpt.json");
    let record = |id: &str, human: &str, gpt: &str| {
        format!(
            r#"{{"id": "{id}", "conversations": [{{"from": "human", "value": "{human}"}}, {{"from": "gpt", "value": "{gpt}"}}]}}"#
        )
    };
    let records = [
        record("a", "first", "an answer of 24 letters."),
        record("b", "a prompt too long for the bound", ""),
        record("c", "second", "ok"),
    ];
    std::fs::write(&file, format!("[{}]", records.join(",\n"))).expect("write");
    let path = file.to_str().expect("utf-8 path");
    let base = [
        "llm",
        "prompts",
        "--sharegpt",
        path,
        "--max-prompt-chars",
        "10",
    ];
    let out = xsched(&base);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = (String::from_utf8_lossy(&out.stdout).lines())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["prompt"], "first");
    assert_eq!(lines[0]["answer_tokens"], 6);
    assert_eq!(lines[1]["prompt"], "second");
    let skipped = xsched(&[&base[..], &["--skip", "1", "--count", "1"]].concat());
    let text = String::from_utf8_lossy(&skipped.stdout);
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains("\"second\""), "{text}");
    let none = xsched(&[&base[..], &["--skip", "2"]].concat());
    assert!(!none.status.success());
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.contains("no prompts left") && err.contains(path),
        "{err}"
    );
}

#[test]
fn llm_load_refuses_a_load_that_sends_nothing_with_the_reason() {
    refused_with_reasons(&[
        (
            &["llm", "load", "--url", "http://engine:8080"][..],
            "--rate",
        ),
        (
            &["llm", "load", "--url", "http://engine:8080", "--rate", "0"],
            "positive",
        ),
        (
            &[
                "llm",
                "load",
                "--url",
                "http://engine:8080",
                "--rate",
                "1",
                "--sequential",
            ],
            "cannot be used with",
        ),
        (
            &[
                "llm",
                "load",
                "--url",
                "http://engine:8080",
                "--sequential",
                "--requests",
                "0",
            ],
            "--requests",
        ),
        (
            &[
                "llm",
                "load",
                "--url",
                "http://engine:8080",
                "--trace",
                "azure-code",
            ],
            "--rate",
        ),
        (
            &[
                "llm",
                "load",
                "--url",
                "http://engine:8080",
                "--rate",
                "1",
                "--trace",
                "/nonexistent/trace.csv",
            ],
            "reading the trace /nonexistent/trace.csv",
        ),
    ]);
}

#[test]
fn llm_serve_refuses_what_it_cannot_do_with_the_reason() {
    refused_with_reasons(&[
        (&["llm", "serve"][..], "--upstream"),
        (
            &["llm", "serve", "--upstream", "https://engine:8080"],
            "not an http:// URL",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--policy",
                "srpt",
            ],
            "known: fcfs, priority, sagesched",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--policy",
                "sagesched-noise-0.5",
            ],
            "only a simulation knows",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--policy",
                "fastserve",
            ],
            "`fastserve:preempt=off` runs its order without pausing",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--router",
                "random",
            ],
            "known: round-robin, least-outstanding, kv-score, cost-aware, prefix-affinity",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--embedding",
                "minilm",
                "--minilm-dir",
                "/nonexistent/minilm",
            ],
            "/nonexistent/minilm",
        ),
        (
            &[
                "llm",
                "serve",
                "--upstream",
                "http://engine:8080",
                "--concurrency",
                "0",
            ],
            "--concurrency",
        ),
    ]);
}

#[test]
fn socket_is_accepted_before_or_after_a_subcommand() {
    let socket = std::env::temp_dir().join(format!("xsched-none-{}.sock", std::process::id()));
    let s = socket.to_str().expect("utf-8 path");
    for args in [
        &["policy", "get", "--socket", s][..],
        &["policy", "--socket", s, "get"],
        &["policy", "set", "fcfs", "--socket", s],
        &["top", "--once", "--socket", s],
    ] {
        let out = xsched(args);
        assert!(!out.status.success(), "{args:?}: no daemon there");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(err.contains(s), "{args:?} names the socket it tried: {err}");
    }
}
