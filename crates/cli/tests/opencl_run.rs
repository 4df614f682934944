//! `xsched run` reaches a program no `LD_PRELOAD` can: one that opens OpenCL with
//! `dlopen("libOpenCL.so.1")` and looks every function up through the handle (as Python's
//! ctypes does for tinygrad). Its queue shows in `xsched top` with the priority `xsched run`
//! gave it, and its results are those it computes without xsched.
//!
//! Needs POCL, the OpenCL headers and a C compiler (scripts/test.sh installs them); without them
//! it fails under CI and is skipped elsewhere, saying why.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Daemon, XSCHED, last_json, skip};

/// The test program, built here, and the OpenCL shim the workspace built.
fn setup() -> Option<(PathBuf, PathBuf)> {
    if !Path::new("/usr/include/CL/cl.h").exists() {
        return skip("no OpenCL headers (opencl-headers)");
    }
    let shim = support::opencl_shim()?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/dlopen_prog.c");
    let program = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dlopen_prog-{}", std::process::id()));
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&program)
        .arg(&source)
        .arg("-ldl")
        .output();
    match out {
        Ok(o) if o.status.success() => Some((program, shim)),
        Ok(o) => skip(&format!("cc: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => skip(&format!("no C compiler: {e}")),
    }
}

#[test]
fn a_program_that_dlopens_the_loader_is_scheduled_through_xsched_run() {
    let Some((program, shim)) = setup() else {
        return;
    };
    let native = Command::new(&program).arg("50").output().expect("runs");
    assert!(native.status.success(), "{native:?}");
    let native = last_json(&String::from_utf8_lossy(&native.stdout));

    let socket = support::socket("run-dlopen");
    let _daemon = Daemon::start(&socket);
    let child = Command::new(XSCHED)
        .args(["run", "--priority", "7", "--global", "--socket"])
        .arg(&socket)
        .arg("--")
        .arg(&program)
        .args(["50", "hold"])
        .env("XSCHED_OPENCL_SHIM", &shim)
        .env("XSCHED_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("xsched run starts");
    // The program replaced `xsched run`: its pid is the one the daemon sees.
    let shimmed = support::released_when_seen(
        child,
        r#"{"holding": true}"#,
        &socket,
        |r| r["priority"] == 7,
        "the program's queue in `xsched top` with priority 7",
    );
    assert_eq!(shimmed, native, "the same results as without xsched");
}

#[test]
fn xsched_run_says_where_it_looked_for_a_missing_shim() {
    let out = Command::new(XSCHED)
        .args(["run", "--", "true"])
        .env("XSCHED_OPENCL_SHIM", "/nonexistent/libxsched_opencl.so")
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("XSCHED_OPENCL_SHIM=/nonexistent/libxsched_opencl.so: no such file"),
        "{err}"
    );
}
