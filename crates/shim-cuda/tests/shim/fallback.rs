//! When xsched cannot schedule (settings it cannot use, a device whose streams it cannot
//! gate), the shim forwards every call directly and the program runs as it does natively.

use super::{setup, waits};

#[test]
fn unusable_xsched_settings_fall_back_to_direct_forwarding() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[], "ref");
    for (var, value, says) in [
        ("XSCHED_SCHEDULER", "remote", "shim disabled"),
        ("XSCHED_PRIORITY", "high", "passed through unscheduled"),
    ] {
        let out = s.run(true, &[(var, value)], var);
        assert_eq!(
            out.json["checksum"], native.json["checksum"],
            "{var}={value}"
        );
        assert_eq!(out.json["errors"], native.json["errors"], "{var}={value}");
        assert_eq!(waits(&out.driver), 0, "nothing gated: {}", out.driver);
        assert!(
            out.log.contains(says) && out.log.contains(var),
            "{}",
            out.log
        );
    }
}

/// As reported against XSched upstream: a hard-coded Level 2 crashed on a GPU that offers Level 1
/// only.
/// Here, on a device without stream memory operations (the fake driver's `FAKE_CUDA_NO_MEMOPS`)
/// the shim cannot gate commands at any level, so at Level 1 or 2 it leaves every stream to the
/// driver: the program's results and status codes are unchanged, and the log says why.
#[test]
fn level_2_asked_of_a_level_1_device_runs_the_program_unchanged_and_says_why() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[("FAKE_CUDA_NO_MEMOPS", "1")], "nomemops-ref");
    for level in ["1", "2"] {
        let out = s.run(
            true,
            &[("FAKE_CUDA_NO_MEMOPS", "1"), ("XSCHED_LEVEL", level)],
            &format!("nomemops-level-{level}"),
        );
        assert_eq!(
            out.json["checksum"], native.json["checksum"],
            "level {level}"
        );
        assert_eq!(out.json["errors"], native.json["errors"], "level {level}");
        // Every stream is left to the driver, named once, with the reason.
        assert!(
            out.log.contains("passed through unscheduled")
                && out.log.contains("no stream memory operations"),
            "the reason is named: {}",
            out.log
        );
    }
}
