//! What both shims' tests need around their unchanged C programs (included with `#[path]`):
//! building one with the system compiler against the shared checksum header
//! (`crates/interpose/c`), and finding the shim library the test's crate built.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile `source` into a program named `name` in the test's temporary folder, with `flags`
/// before the output and `link` after the source; the compiler's complaint if it fails.
pub fn build(name: &str, source: &Path, flags: &[&str], link: &[&str]) -> Result<PathBuf, String> {
    let program =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../interpose/c");
    let out = Command::new("cc")
        .args(["-O2", "-Wall"])
        .args(flags)
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&program)
        .arg(source)
        .args(link)
        .output()
        .map_err(|e| format!("no C compiler (cc): {e}"))?;
    if out.status.success() {
        Ok(program)
    } else {
        Err(format!("cc: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// The shim's shared library, built beside this test's executable (target/<profile>/deps).
pub fn shim_library(file: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let shim = exe.parent().expect("deps folder").join(file);
    assert!(shim.exists(), "{} was not built", shim.display());
    shim
}
