//! How programs find the driver's entry points through the shim: only through
//! `cuGetProcAddress` (the CUDA runtime's way), and `dlsym` lookups relative to their caller.

use super::{output_within, program, setup, waits};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// As reported against XSched upstream (vLLM on an A10): programs that reach the driver the CUDA
/// runtime's way are never linked against libcuda; they `dlopen` it and take every entry point
/// from `cuGetProcAddress_v2`, found with `dlsym` on the driver's handle or through
/// `dlsym(RTLD_NEXT)`, at CUDA 12 or CUDA 13 version numbers. Such a program
/// (`tests/c/cudart_like.c`) gets the native result under the shim each way, with its stream
/// scheduled and its launches gated.
#[test]
fn a_program_that_finds_the_driver_only_through_cu_get_proc_address_is_scheduled() {
    let Some(s) = setup() else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/cudart_like.c");
    let program =
        program::build("cudart_like", &source, &[], &["-ldl"]).unwrap_or_else(|e| panic!("{e}"));
    for lookup in ["handle", "next"] {
        for version in ["12040", "13000"] {
            let args = ["2048", "10", lookup, version];
            let tag = format!("cudart-{lookup}-{version}");
            let native = s.run_program(&program, &args, false, &[], &format!("{tag}-ref"));
            let shimmed = s.run_program(&program, &args, true, &[], &tag);
            assert_eq!(shimmed.json["checksum"], native.json["checksum"], "{tag}");
            assert_eq!(waits(&native.driver), 0, "{tag}");
            assert!(
                shimmed.log.contains("scheduled as XQueue"),
                "{tag}: the stream is scheduled: {}",
                shimmed.log
            );
            // Its copies are through pageable memory, so they run ungated (`pageable.rs`).
            assert!(
                waits(&shimmed.driver) >= 10,
                "{tag}: the launches waited behind their gates: {}",
                shimmed.driver
            );
        }
    }
}

/// The shim's `dlsym` keeps the caller of every other lookup: a library opened `RTLD_LOCAL` (as
/// Python opens extension modules) finds a symbol of its own dependency with `RTLD_DEFAULT`,
/// and `RTLD_NEXT` from it finds the next definition after it, under the shim as natively.
#[test]
fn lookups_through_the_shims_dlsym_answer_relative_to_their_caller() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/dlsym_scope.c");
    let shared = ["-shared", "-fPIC"];
    let build = |name: &str, flags: &[&str], link: &[&str]| {
        program::build(name, &source, flags, link).unwrap_or_else(|e| panic!("{e}"))
    };
    let libb = build("dlsym-b", &[&shared[..], &["-DPART_B"]].concat(), &[]);
    let liba_link = libb.to_string_lossy().into_owned();
    let liba = build(
        "dlsym-a",
        &[&shared[..], &["-DPART_A"]].concat(),
        // Kept as a dependency though liba names none of its symbols at link time.
        &["-Wl,--no-as-needed", &liba_link, "-ldl"],
    );
    let main = build("dlsym-main", &[], &["-ldl"]);
    let shim = program::shim_library("libxsched_cuda.so");
    let run = |preload: bool| {
        let mut c = Command::new(&main);
        c.arg(&liba);
        for var in xsched_interpose::STEERING_VARS {
            c.env_remove(var);
        }
        if preload {
            c.env("LD_PRELOAD", &shim);
        }
        let out = output_within(c, Duration::from_secs(60), "dlsym");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(false), r#"{"default":1,"next":2}"#, "natively");
    assert_eq!(run(true), r#"{"default":1,"next":2}"#, "under the shim");
}
