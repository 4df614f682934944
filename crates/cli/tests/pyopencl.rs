//! PyOpenCL (PyPI's wheel, unchanged) under `xsched run`: its wheel links its own copy of the ICD
//! loader under another name (`pyopencl/.libs/libOpenCL-<hash>.so.1`), which no library path can
//! stand in for; `xsched run` also preloads the shim, whose definitions its versioned references
//! bind to. The program's queue shows in `xsched top` with the priority `xsched run` gave it, and
//! its result is the one it computes without xsched.
//!
//! Needs XSCHED_TINYGRAD_PYTHON (scripts/tinygrad.sh installs PyOpenCL beside tinygrad;
//! scripts/test.sh sets it); without it this fails under CI and is skipped elsewhere, saying why.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Daemon, XSCHED, last_json, skip};

fn setup() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let Some(python) = std::env::var_os("XSCHED_TINYGRAD_PYTHON").map(PathBuf::from) else {
        return skip("XSCHED_TINYGRAD_PYTHON is not set (bash scripts/tinygrad.sh)");
    };
    let shim = support::opencl_shim()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pyopencl/saxpy.py");
    Some((python, script, shim))
}

#[test]
fn pyopencl_with_its_own_loader_is_scheduled_through_xsched_run() {
    let Some((python, script, shim)) = setup() else {
        return;
    };
    let native = Command::new(&python)
        .arg(&script)
        .arg("40")
        .output()
        .expect("runs");
    assert!(native.status.success(), "{native:?}");
    let native = last_json(&String::from_utf8_lossy(&native.stdout));

    let socket = support::socket("run-pyopencl");
    let _daemon = Daemon::start(&socket);
    let child = Command::new(XSCHED)
        .args(["run", "--priority", "6", "--global", "--socket"])
        .arg(&socket)
        .arg("--")
        .arg(&python)
        .arg(&script)
        .args(["40", "hold"])
        .env("XSCHED_OPENCL_SHIM", &shim)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("xsched run starts");
    let scheduled = support::released_when_seen(
        child,
        "holding",
        &socket,
        |r| r["priority"] == 6 && r["completed"] == 40,
        "PyOpenCL's queue in `xsched top`, priority 6, its 40 launches completed",
    );
    assert_eq!(scheduled, native, "the same result as without xsched");
}
