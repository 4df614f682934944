//! Kernel slicing is exact (docs/KERNEL-SLICING.md): an unchanged C program (`tests/c/
//! slicecheck.c`, linked with -lOpenCL only) checks, for random NDRange shapes (one to three
//! dimensions, random local sizes), that every work-item of a launch the shim cut into slices
//! ran exactly once with the global, group and local ids, number of groups and global size it
//! has in the whole launch, for slice budgets from 1 µs (every launch cut into single groups
//! where the bound allows) to 50 µs; natively first, to check the checker.
//!
//! Needs POCL, the headers and a C compiler (scripts/test.sh installs them); without them this
//! fails under CI and is skipped elsewhere, saying why.

#[path = "../../interpose/tests/support/program.rs"]
mod program;

use std::path::{Path, PathBuf};
use std::process::Command;

fn setup() -> Option<(PathBuf, PathBuf)> {
    let skip = |why: String| {
        assert!(
            std::env::var("CI").is_err(),
            "CI needs this (scripts/test.sh installs it): {why}"
        );
        eprintln!("skipped: {why}");
        None
    };
    if let Err(e) = xsched_backend_opencl::devices() {
        return skip(e.to_string());
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/slicecheck.c");
    match program::build("slicecheck", &source, &[], &["-lOpenCL"]) {
        Ok(p) => Some((p, program::shim_library("libxsched_opencl.so"))),
        Err(e) => skip(e),
    }
}

/// `count` shapes from a seeded generator: DIMS G0 G1 G2 L0 L1 L2 each.
fn shapes(seed: u64, count: usize) -> Vec<String> {
    let mut x = seed;
    let mut next = |n: u64| {
        // A 64-bit LCG (Knuth's MMIX constants): reproducible, no dependency.
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut args = Vec::new();
    for _ in 0..count {
        let dims = 1 + next(3) as usize;
        let mut g = [1u64; 3];
        let mut l = [1u64; 3];
        for d in 0..dims {
            l[d] = [1, 2, 4, 8, 16][next(5) as usize];
            g[d] = l[d] * (1 + next(if dims == 1 { 300 } else { 24 }));
        }
        args.push(dims.to_string());
        args.extend(g.iter().chain(&l).map(u64::to_string));
    }
    args
}

fn checked(out: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn every_work_item_of_a_cut_launch_runs_once_with_its_whole_launch_ids() {
    let Some((program, shim)) = setup() else {
        return;
    };
    for (seed, budget_us) in [(1, "1"), (2, "3"), (3, "50")] {
        let args = shapes(seed, 12);
        let native = checked(&Command::new(&program).args(&args).output().expect("runs"));
        assert_eq!(native["mismatches"], 0, "the checker itself: {native}");
        let out = Command::new(&program)
            .args(&args)
            .env("LD_PRELOAD", &shim)
            .env("XSCHED_SLICE_US", budget_us)
            .env("XSCHED_LOG", "info")
            .output()
            .expect("runs");
        let sliced = checked(&out);
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            sliced["mismatches"], 0,
            "budget {budget_us} us: {sliced}\n{log}"
        );
        assert_eq!(sliced["checked"], native["checked"]);
        let cut = log.matches(" cut into ").count();
        // At 50 µs the smallest shapes run whole; at 1 and 3 µs both kernels are cut.
        assert!(
            cut >= 2 || budget_us == "50",
            "both kernels were cut (budget {budget_us} us): {log}"
        );
    }
}

#[test]
fn a_bad_slice_budget_is_said_once_and_the_program_runs_uncut() {
    let Some((program, shim)) = setup() else {
        return;
    };
    let args = shapes(4, 3);
    for bad in ["fast", "-5", "1.5"] {
        let out = Command::new(&program)
            .args(&args)
            .env("LD_PRELOAD", &shim)
            .env("XSCHED_SLICE_US", bad)
            .env("XSCHED_LOG", "info")
            .output()
            .expect("runs");
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(checked(&out)["mismatches"], 0, "{bad}: {log}");
        assert_eq!(
            log.matches("XSCHED_SLICE_US").count(),
            1,
            "{bad}: said once: {log}"
        );
        assert!(log.contains("kernel slicing off"), "{bad}: {log}");
        assert!(!log.contains(" cut into "), "{bad}: nothing cut: {log}");
    }
}
