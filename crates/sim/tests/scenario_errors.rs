//! A malformed or inconsistent scenario is rejected with file, line and field.

use xsched_sim::{Scenario, ScenarioError};

fn error_of(src: &str) -> (usize, String) {
    match Scenario::parse("bad.toml", src) {
        Err(ScenarioError::Invalid {
            line,
            message,
            file,
            ..
        }) => {
            assert_eq!(file, "bad.toml");
            (line, message)
        }
        Err(other) => panic!("unexpected error kind: {other}"),
        Ok(_) => panic!("accepted:\n{src}"),
    }
}

#[test]
fn unknown_field_names_field_and_line() {
    let (line, msg) = error_of("experiment = \"fg-bg\"\nseed = 3\nrequets = 5\n");
    assert_eq!(line, 3);
    assert!(msg.contains("requets"), "{msg}");
    // The fields it might have meant include the header's.
    assert!(
        msg.contains("`seed`") && msg.contains("`requests`"),
        "{msg}"
    );
}

#[test]
fn an_unknown_field_lists_every_field_in_every_experiment() {
    // As when each experiment's struct held the header's fields itself: "expected one of" the
    // header's fields, then the experiment's own, however few those are (serde words a list of
    // one or two differently: "expected `a` or `b`").
    for kind in xsched_sim::scenario::EXPERIMENTS {
        let (line, msg) = error_of(&format!("experiment = \"{kind}\"\n\nbogus = 1\n"));
        assert_eq!(line, 3, "{kind}: {msg}");
        let list = msg
            .strip_prefix(
                "unknown field `bogus`, expected one of `experiment`, `seed`, `known_miss`, `",
            )
            .unwrap_or_else(|| panic!("{kind}: {msg}"));
        assert!(
            list.ends_with('`') && !list.contains(" or ") && !list.contains("in `["),
            "{kind}: {msg}"
        );
    }
    // multi-device has two fields of its own.
    let (_, msg) = error_of("experiment = \"multi-device\"\nbogus = 1\n");
    assert_eq!(
        msg,
        "unknown field `bogus`, expected one of `experiment`, `seed`, `known_miss`, `pairs`, `requests`"
    );
    // An unknown table is an unknown field too, wherever it sits in the file.
    let (line, msg) = error_of("experiment = \"fg-bg\"\nrequests = 5\n\n[extra]\nx = 1\n");
    assert_eq!(line, 4);
    assert_eq!(
        msg,
        "unknown field `extra`, expected one of `experiment`, `seed`, `known_miss`, `devices`, `levels`, \
         `requests`, `budget_us`, `arrival`"
    );
}

#[test]
fn a_scenario_error_is_not_qualified_by_a_table() {
    // Scenario fields are top-level keys; a `[table]` is no place to name (device profiles,
    // whose fields sit in tables, name it).
    for (src, line, expected) in [
        (
            "experiment = \"fg-bg\"\n\n[requests]\nx = 1\n",
            3,
            "invalid type: map, expected u64",
        ),
        (
            "experiment = \"fg-bg\"\nrequests.x = 1\n",
            2,
            "field `requests.x`: invalid type: map, expected u64",
        ),
        (
            "experiment = \"multi-device\"\n\n[[pairs]]\nx = 1\n",
            3,
            "invalid type: map, expected an array of length 2",
        ),
        (
            "experiment = \"fg-bg\"\n[seed]\nx = 1\n",
            2,
            "invalid type: map, expected u64",
        ),
    ] {
        let (l, msg) = error_of(src);
        assert_eq!((l, msg.as_str()), (line, expected), "{src}");
    }
    let (line, msg) = error_of("[extra]\nexperiment = \"fg-bg\"\n");
    assert_eq!(line, 1);
    assert!(msg.starts_with("missing field `experiment`;"), "{msg}");
}

#[test]
fn threshold_below_batch_is_rejected() {
    let (line, msg) = error_of(
        "experiment = \"preempt-latency\"\ndevices = [\"gv100\"]\nthreshold = 2\nbatch = 4\n",
    );
    assert_eq!(line, 4);
    assert!(msg.contains("batch") && msg.contains("threshold"), "{msg}");
}

#[test]
fn unsupported_level_is_an_error_not_a_downgrade() {
    let (line, msg) =
        error_of("experiment = \"fg-bg\"\ndevices = [\"gv100\", \"mi50\"]\nlevels = [2]\n");
    assert_eq!(line, 3);
    assert!(msg.contains("levels") && msg.contains("mi50"), "{msg}");
}

#[test]
fn negative_time_is_rejected() {
    let (line, msg) = error_of("experiment = \"preempt-latency\"\nbudget_us = -5\n");
    assert_eq!(line, 2);
    assert!(msg.contains("budget_us"), "{msg}");
}

#[test]
fn unknown_experiment_and_device_are_named() {
    let (line, msg) = error_of("seed = 1\nexperiment = \"fg-fg\"\n");
    assert_eq!(line, 2);
    assert!(msg.contains("fg-fg") && msg.contains("fg-bg"), "{msg}");
    let (line, msg) = error_of("experiment = \"bandwidth\"\n\ndevices = [\"h100\"]\n");
    assert_eq!(line, 3);
    assert!(msg.contains("h100") && msg.contains("gv100"), "{msg}");
    let (_, msg) = error_of("seed = 1\n");
    assert!(msg.contains("experiment"), "{msg}");
}

#[test]
fn a_bad_header_field_is_named_in_every_experiment() {
    // The header (experiment, seed) is one struct that every experiment shares.
    for kind in xsched_sim::scenario::EXPERIMENTS {
        let (line, msg) = error_of(&format!("experiment = \"{kind}\"\n\nseed = -1\n"));
        assert_eq!(line, 3, "{kind}: {msg}");
        assert!(msg.contains("`seed`"), "{kind}: {msg}");
    }
    let (line, msg) = error_of("seed = \"one\"\nexperiment = \"fg-bg\"\n");
    assert_eq!(line, 1);
    assert!(msg.contains("`seed`"), "{msg}");
    let (line, msg) = error_of("seed = 1\nexperiment = 7\n");
    assert_eq!(line, 2);
    assert!(msg.contains("`experiment`"), "{msg}");
}

#[test]
fn every_shipped_scenario_parses() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("scenarios/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Err(e) = Scenario::load(&path) {
                panic!("{e}");
            }
            n += 1;
        }
    }
    assert!(n >= 5, "found {n} scenarios");
}

#[test]
fn a_case_study_on_a_device_without_its_level_is_an_error() {
    let (line, msg) =
        error_of("experiment = \"case-ai-pc\"\ndevice = \"mi50\"\nlevel = 2\nseconds = 5\n");
    assert_eq!(line, 3);
    assert!(msg.contains("level") && msg.contains("mi50"), "{msg}");
    let (line, msg) =
        error_of("experiment = \"case-ai-pc\"\nspeech_period_ms = 1000\nlaxity_ms = 1000\n");
    assert_eq!(line, 3);
    assert!(msg.contains("laxity_ms"), "{msg}");
    // The harvesting study at Level 3 asked of the Level-1 MI50: an error, not a downgrade.
    let (line, msg) = error_of("experiment = \"case-harvest\"\ndevices = [\"mi50\"]\nlevel = 3\n");
    assert_eq!(line, 3);
    assert!(msg.contains("level") && msg.contains("mi50"), "{msg}");
}

#[test]
fn a_two_model_study_names_its_bad_fields() {
    for (src, field) in [
        ("rates = []\n", "rates"),
        ("rates = [100, 0]\n", "rates"),
        ("rates = [400, 200]\n", "rates"),
        ("request_cmd_us = [0, 5]\n", "request_cmd_us"),
        ("paella_dispatch_ns = 0\n", "paella_dispatch_ns"),
        ("level = 4\n", "level"),
    ] {
        let (line, msg) = error_of(&format!("experiment = \"case-two-model\"\n{src}"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains(field), "{msg}");
    }
}

#[test]
fn a_harvesting_study_names_its_bad_fields() {
    for (src, line, field) in [
        ("jobs = [\"mining\"]\n", 2, "jobs"),
        ("production_load = 1.5\n", 2, "production_load"),
        ("quota_share = 0\n", 2, "quota_share"),
        ("seconds = 0\n", 2, "seconds"),
        ("\nfinancial_cmd_us = [10, 5]\n", 3, "financial_cmd_us"),
        ("devices = [\"gv200\"]\n", 2, "devices"),
    ] {
        let (l, msg) = error_of(&format!("experiment = \"case-harvest\"\n{src}"));
        assert_eq!(l, line, "{msg}");
        assert!(msg.contains(field), "{msg}");
    }
}

#[test]
fn a_known_miss_is_read_strictly_and_judged_against_the_run() {
    let (_, msg) = error_of("experiment = \"multi-device\"\n[[known_miss]]\ncheck = \"x\"\n");
    assert!(msg.contains("missing field `why`"), "{msg}");
    let (_, msg) = error_of(
        "experiment = \"multi-device\"\n[[known_miss]]\ncheck = \"x\"\nwhy = \"y\"\nnote = 1\n",
    );
    assert!(msg.contains("unknown field `note`"), "{msg}");
    let scenario = xsched_sim::Scenario::parse(
        "t.toml",
        "experiment = \"multi-device\"\nrequests = 50\n[[known_miss]]\ncheck = \"no such check\"\nwhy = \"a typo\"\n",
    )
    .expect("parses");
    assert_eq!(scenario.known_misses().len(), 1);
    let report = scenario.run(&|_, _| {});
    let surprises = scenario.surprises(&report);
    assert!(
        surprises
            .0
            .iter()
            .any(|s| s.contains("names no check of this run")),
        "{surprises:?}"
    );
}
