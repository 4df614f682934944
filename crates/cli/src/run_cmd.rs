//! `xsched run [--priority N] [--global] -- CMD`: a program run unchanged with its OpenCL
//! queues under xsched. Two ways in, both set, so no way of reaching OpenCL escapes:
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
//! by path itself. Then `CMD` replaces this process (its pid is the one `xsched top` shows, and
//! its exit status is the command's).

use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim's file name.
const SHIM: &str = "libxsched_opencl.so";
/// The names a program opens OpenCL's loader by.
const LOADER_NAMES: [&str; 2] = ["libOpenCL.so.1", "libOpenCL.so"];

/// What to run, and under which hints.
pub struct RunArgs {
    /// `XSCHED_PRIORITY` for every queue of the program.
    pub priority: Option<i32>,
    /// `XSCHED_LEVEL`.
    pub level: Option<u8>,
    /// The daemon's socket, when scheduled through it (`XSCHED_SCHEDULER=global`).
    pub global: Option<PathBuf>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Replace this process with `args.command`, the shim first on its library path.
pub fn run(args: &RunArgs) -> Result<()> {
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no command given: xsched run [OPTIONS] -- CMD [ARGS...]");
    };
    let shim = find_shim()?;
    splittable(&shim)?;
    let folder = stand_in_folder(&shim, &cache_root())?;
    splittable(&folder)?;
    let mut cmd = Command::new(program);
    cmd.args(rest)
        .env(
            "LD_LIBRARY_PATH",
            search_path(&folder, "LD_LIBRARY_PATH", ":"),
        )
        .env("LD_PRELOAD", search_path(&shim, "LD_PRELOAD", " "));
    if let Some(p) = args.priority {
        cmd.env("XSCHED_PRIORITY", p.to_string());
    }
    if let Some(l) = args.level {
        cmd.env("XSCHED_LEVEL", l.to_string());
    }
    if let Some(socket) = &args.global {
        cmd.env("XSCHED_SCHEDULER", "global")
            .env("XSCHED_SOCKET", socket);
    }
    let err = cmd.exec();
    Err(err).with_context(|| format!("running {}", Path::new(program).display()))
}

/// Refuse a path that `LD_PRELOAD` or `LD_LIBRARY_PATH` would split in two.
fn splittable(path: &Path) -> Result<()> {
    let text = path.to_string_lossy();
    if text.contains([' ', ':']) {
        bail!(
            "{text}: the dynamic linker splits paths at spaces and colons; put the shim (or \
             XDG_CACHE_HOME) where the path has neither and name it in XSCHED_OPENCL_SHIM"
        );
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

/// The OpenCL shim: `XSCHED_OPENCL_SHIM`, else beside this binary (a cargo build), else in
/// `../lib/xsched` from it (the image's and a package's layout).
fn find_shim() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("XSCHED_OPENCL_SHIM") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("XSCHED_OPENCL_SHIM={}: no such file", p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("locating the xsched binary")?;
    let dir = exe.parent().context("the xsched binary has no folder")?;
    let places = [dir.join(SHIM), dir.join("../lib/xsched").join(SHIM)];
    if let Some(p) = places.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    bail!(
        "the OpenCL shim ({SHIM}) is not in {}: build it (cargo build --release -p \
         xsched-shim-opencl) or name it in XSCHED_OPENCL_SHIM",
        places
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    )
}

/// A folder under `root` (this user's cache) holding the loader's names as links to `shim`,
/// made once per shim path (a rebuilt shim is picked up: the links name its path).
fn stand_in_folder(shim: &Path, root: &Path) -> Result<PathBuf> {
    let shim = shim
        .canonicalize()
        .with_context(|| format!("resolving {}", shim.display()))?;
    // A cache key only: a new toolchain that hashed differently would make a new folder.
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&shim, &mut hasher);
    let key = format!("{:016x}", std::hash::Hasher::finish(&hasher));
    let folder = root.join("xsched").join("opencl").join(key);
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    for name in LOADER_NAMES {
        link(&shim, &folder.join(name))?;
    }
    Ok(folder)
}

/// `$XDG_CACHE_HOME`, else `$HOME/.cache`, else the temporary folder.
fn cache_root() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

/// `at` made a link to `target`, atomically (two runs at once both see a whole link).
fn link(target: &Path, at: &Path) -> Result<()> {
    if std::fs::read_link(at).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let tmp = at.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .and_then(|()| std::fs::rename(&tmp, at))
        .with_context(|| format!("linking {} to {}", at.display(), target.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let args = RunArgs {
            priority: None,
            level: None,
            global: None,
            command: Vec::new(),
        };
        let err = run(&args).expect_err("refused").to_string();
        assert!(err.contains("xsched run [OPTIONS] -- CMD"), "{err}");
    }
}
