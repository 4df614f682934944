//! The C example program (c/example.c) compiled with the system C compiler against the static
//! library and the generated header, then run: the C API works from C, returns status codes for
//! bad input, and never aborts.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the static library. `cargo test` builds only the rlib of this crate, so the test
/// runs cargo itself, in a target directory of its own (no lock shared with the outer build).
fn build_static_library(crate_dir: &Path) -> PathBuf {
    let target = crate_dir.join("../../target/c-example");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "xsched-capi", "--target-dir"])
        .arg(&target)
        .current_dir(crate_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building libxsched.a failed");
    target.join("debug/libxsched.a")
}

#[test]
fn c_example_compiles_and_passes() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = build_static_library(crate_dir);
    assert!(lib.exists(), "{} missing after the build", lib.display());
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out_dir = std::env::temp_dir().join(format!("xsched-c-example-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let exe = out_dir.join("example");
    let build = Command::new(&compiler)
        .args([
            "-std=c11",
            "-D_POSIX_C_SOURCE=199309L",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("c/example.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler `{compiler}`: {e} (scripts/test.sh installs gcc)")
        });
    assert!(
        build.status.success(),
        "C example does not compile:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(&exe)
        .env_remove("XSCHED_PRIORITY")
        .env_remove("XSCHED_LEVEL")
        .env_remove("XSCHED_THRESHOLD")
        .env_remove("XSCHED_BATCH")
        .env_remove("XSCHED_INFLIGHT_US")
        .env("XSCHED_SOCKET", "/nonexistent/xsched-c-example.sock")
        .output()
        .expect("C example runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(
        run.status.success(),
        "C example failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
