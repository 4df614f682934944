//! The fake CUDA driver (`tests/fake/libcuda.c`) built for this test process, shared by the
//! backend's and the shim's tests. `XSCHED_CUDA_REAL=1` uses the machine's real driver instead
//! (scripts/gpu-check.sh).

#![allow(dead_code)] // each test crate uses part of it

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Whether the tests run on the real driver.
pub fn real() -> bool {
    std::env::var("XSCHED_CUDA_REAL").is_ok_and(|v| v == "1")
}

/// A folder holding the fake as `libcuda.so`, linked as `libcuda.so.1` (built once per process; a C
/// compiler is required, as for the other C-based tests).
pub fn library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../backend-cuda/tests/fake/libcuda.c");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fake-cuda-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("fake driver folder");
        let lib = dir.join("libcuda.so");
        let out = Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-O2",
                "-Wall",
                "-Wl,-soname,libcuda.so",
                "-o",
            ])
            .arg(&lib)
            .arg(&source)
            .arg("-lpthread")
            .output()
            .expect("a C compiler (cc) builds the fake CUDA driver");
        assert!(
            out.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A link, not a copy: both names must load the one driver (same file, same state). A
        // folder left by an earlier process with the same id may hold one already.
        let link = dir.join("libcuda.so.1");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libcuda.so", &link).expect("libcuda.so.1");
        dir
    })
}

/// Make this process use the fake driver (or the real one with `XSCHED_CUDA_REAL=1`): the fake
/// is loaded by path, so the backend's `dlopen("libcuda.so")` finds it by its soname.
pub fn use_driver() {
    static LOADED: OnceLock<()> = OnceLock::new();
    LOADED.get_or_init(|| {
        if real() {
            return;
        }
        let path = library_dir().join("libcuda.so");
        // SAFETY: the fake's initialisers only set up statics; it stays loaded for the process.
        let lib = unsafe { libloading::Library::new(&path) }.expect("the fake driver loads");
        std::mem::forget(lib);
    });
}
