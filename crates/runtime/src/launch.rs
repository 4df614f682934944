//! The command that runs a program unchanged with its OpenCL queues under xsched (`xsched run`).
//! Two ways in, both set, so no way of reaching OpenCL escapes:
//!
//! - the shim stands in for `libOpenCL.so.1`: a folder holding `libOpenCL.so.1` and
//!   `libOpenCL.so` (links to the shim) goes first on `LD_LIBRARY_PATH`, for programs that
//!   `dlopen` the loader by name (Python's ctypes: tinygrad; Java bindings) and look functions up
//!   through the handle with `dlsym`, where a preloaded symbol is never seen;
//! - the shim is preloaded (`LD_PRELOAD`), for programs linked against a loader of another name
//!   that the library path cannot stand in for (PyPI's PyOpenCL bundles its own
//!   `libOpenCL-<hash>.so.1`); its versioned references bind to the shim's definitions.
//!
//! Both name the same file, which the dynamic linker loads once. The shim finds the real loader
//! by path itself. The folder is kept in xsched's cache folder ([`crate::cache_dir`]:
//! `XSCHED_CACHE_DIR` is honoured), else in the temporary folder. The hints go in as the
//! variables this crate reads, by the names its environment module declares, so the launcher
//! and the runtime it starts cannot disagree on one. The caller runs the command (`xsched run`
//! replaces itself with it).

use crate::cache::cache_dir;
use crate::env::{LEVEL, PRIORITY, SCHEDULER, SOCKET};
use crate::error::{RuntimeError, SHIM, SHIM_VAR};
use crate::options::WhoSchedules;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The names a program opens OpenCL's loader by.
const LOADER_NAMES: [&str; 2] = ["libOpenCL.so.1", "libOpenCL.so"];

/// What to run, and under which hints.
#[derive(Clone, Debug, Default)]
pub struct LaunchSpec {
    /// `XSCHED_PRIORITY` for every queue of the program.
    pub priority: Option<i32>,
    /// `XSCHED_LEVEL`.
    pub level: Option<u8>,
    /// The daemon's socket, when scheduled through it (`XSCHED_SCHEDULER=global`).
    pub global: Option<PathBuf>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// The command that runs `spec.command` with the shim first on its library path and
/// preloaded, and `spec`'s hints set; the caller runs it.
pub fn opencl_command(spec: &LaunchSpec) -> Result<Command, RuntimeError> {
    let Some((program, rest)) = spec.command.split_first() else {
        return Err(RuntimeError::NoCommand);
    };
    let shim = find_shim()?;
    splittable(&shim)?;
    let root = cache_dir().unwrap_or_else(|| std::env::temp_dir().join("xsched"));
    let folder = stand_in_folder(&shim, &root)?;
    splittable(&folder)?;
    let mut cmd = Command::new(program);
    cmd.args(rest)
        .env(
            "LD_LIBRARY_PATH",
            search_path(&folder, "LD_LIBRARY_PATH", ":"),
        )
        .env("LD_PRELOAD", search_path(&shim, "LD_PRELOAD", " "))
        .envs(hint_vars(spec));
    Ok(cmd)
}

/// The runtime's variables that carry `spec`'s hints, by the names the runtime reads.
fn hint_vars(spec: &LaunchSpec) -> Vec<(&'static str, OsString)> {
    let mut vars: Vec<(&'static str, OsString)> = Vec::new();
    if let Some(p) = spec.priority {
        vars.push((PRIORITY, p.to_string().into()));
    }
    if let Some(l) = spec.level {
        vars.push((LEVEL, l.to_string().into()));
    }
    if let Some(socket) = &spec.global {
        vars.push((SCHEDULER, WhoSchedules::Global.name().into()));
        vars.push((SOCKET, socket.clone().into_os_string()));
    }
    vars
}

/// Refuse a path that `LD_PRELOAD` or `LD_LIBRARY_PATH` would split in two.
fn splittable(path: &Path) -> Result<(), RuntimeError> {
    if path.to_string_lossy().contains([' ', ':']) {
        return Err(RuntimeError::Splittable {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// `first`, then whatever the variable `name` held (its entries separated by `sep`).
fn search_path(first: &Path, name: &str, sep: &str) -> OsString {
    let mut path = first.as_os_str().to_owned();
    if let Some(old) = std::env::var_os(name).filter(|o| !o.is_empty()) {
        path.push(sep);
        path.push(old);
    }
    path
}

/// The OpenCL shim: `XSCHED_OPENCL_SHIM`, else beside the running binary (a cargo build), else
/// in `../lib/xsched` from it (the image's and a package's layout).
fn find_shim() -> Result<PathBuf, RuntimeError> {
    if let Some(p) = std::env::var_os(SHIM_VAR) {
        let path = PathBuf::from(p);
        if !path.is_file() {
            return Err(RuntimeError::NoShimFile { path });
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().map_err(RuntimeError::Exe)?;
    let dir = exe.parent().ok_or(RuntimeError::NoExeFolder)?;
    let places = vec![dir.join(SHIM), dir.join("../lib/xsched").join(SHIM)];
    if let Some(p) = places.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    Err(RuntimeError::NoShim { places })
}

/// A folder under `root` (xsched's cache folder) holding the loader's names as links to `shim`,
/// made once per shim path (a rebuilt shim is picked up: the links name its path).
fn stand_in_folder(shim: &Path, root: &Path) -> Result<PathBuf, RuntimeError> {
    let shim = shim
        .canonicalize()
        .map_err(|source| RuntimeError::Resolve {
            path: shim.to_path_buf(),
            source,
        })?;
    // A cache key only: a new toolchain that hashed differently would make a new folder.
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&shim, &mut hasher);
    let key = format!("{:016x}", std::hash::Hasher::finish(&hasher));
    let folder = root.join("opencl").join(key);
    std::fs::create_dir_all(&folder).map_err(|source| RuntimeError::CreateFolder {
        path: folder.clone(),
        source,
    })?;
    for name in LOADER_NAMES {
        link(&shim, &folder.join(name))?;
    }
    Ok(folder)
}

/// `at` made a link to `target`, atomically (two runs at once both see a whole link).
fn link(target: &Path, at: &Path) -> Result<(), RuntimeError> {
    if std::fs::read_link(at).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let tmp = at.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .and_then(|()| std::fs::rename(&tmp, at))
        .map_err(|source| RuntimeError::Link {
            at: at.to_path_buf(),
            target: target.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{QueueOptions, RuntimeConfig};
    use xsched_core::Level;

    #[test]
    fn the_stand_in_folder_links_both_names_to_the_shim_and_is_made_once() {
        let dir = tempfile::tempdir().expect("dir");
        let shim = dir.path().join(SHIM);
        std::fs::write(&shim, b"not a library").expect("write");
        let folder = stand_in_folder(&shim, dir.path()).expect("folder");
        for name in LOADER_NAMES {
            let target = std::fs::read_link(folder.join(name)).expect("link");
            assert_eq!(target, shim.canonicalize().expect("canonical"));
        }
        let again = stand_in_folder(&shim, dir.path()).expect("again");
        assert_eq!(folder, again, "one folder per shim");
    }

    #[test]
    fn the_folder_and_the_shim_go_first_on_their_search_paths() {
        let path = search_path(Path::new("/x/y"), "LD_LIBRARY_PATH", ":");
        assert!(path.to_string_lossy().starts_with("/x/y"), "{path:?}");
        let preload = search_path(Path::new("/x/lib.so"), "XSCHED_TEST_UNSET_PRELOAD", " ");
        assert_eq!(preload, "/x/lib.so");
    }

    #[test]
    fn a_path_the_dynamic_linker_would_split_is_refused() {
        for bad in ["/a b/libxsched_opencl.so", "/a:b/libxsched_opencl.so"] {
            let err = splittable(Path::new(bad)).expect_err("refused").to_string();
            assert!(
                err.contains(bad) && err.contains("XSCHED_OPENCL_SHIM"),
                "{err}"
            );
        }
        assert!(splittable(Path::new("/a/b/libxsched_opencl.so")).is_ok());
    }

    #[test]
    fn a_missing_command_is_refused_with_the_usage() {
        let err = opencl_command(&LaunchSpec::default()).expect_err("refused");
        assert!(matches!(err, RuntimeError::NoCommand));
        let text = err.to_string();
        assert!(text.contains("xsched run [OPTIONS] -- CMD"), "{text}");
    }

    #[test]
    fn the_hints_are_set_by_the_names_the_runtime_reads() {
        let spec = LaunchSpec {
            priority: Some(-3),
            level: Some(2),
            global: Some(PathBuf::from("/run/x.sock")),
            command: Vec::new(),
        };
        let vars = hint_vars(&spec);
        let lookup = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        let queue = QueueOptions::from_lookup(&lookup).expect("valid");
        assert_eq!(
            (queue.hints.priority, queue.level),
            (-3, Some(Level::Deactivate))
        );
        let config = RuntimeConfig::from_lookup(&lookup).expect("valid");
        assert_eq!(config.scheduler, WhoSchedules::Global);
        assert_eq!(config.socket, spec.global);
        assert!(
            hint_vars(&LaunchSpec::default()).is_empty(),
            "no hint, no variable"
        );
    }

    #[test]
    fn a_missing_shim_names_every_place_looked_in() {
        let places = vec![PathBuf::from("/a/lib.so"), PathBuf::from("/b/lib.so")];
        let text = RuntimeError::NoShim { places }.to_string();
        assert!(
            text.contains("(libxsched_opencl.so) is not in /a/lib.so or /b/lib.so: build it"),
            "{text}"
        );
        assert!(text.ends_with("or name it in XSCHED_OPENCL_SHIM"), "{text}");
    }
}
