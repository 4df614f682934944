//! The real ICD loader, found without ever finding this library: however the shim was loaded
//! (as `libOpenCL.so.1` first on `LD_LIBRARY_PATH`, by path, or preloaded), the name
//! `libOpenCL.so.1` may lead back to it, so the loader is looked for by path and each candidate
//! is checked for the shim's marker symbol before it is used.
//!
//! Where it looks, in order: `XSCHED_OPENCL_LIBRARY` (a path), then `libOpenCL.so.1` in each
//! folder of `LD_LIBRARY_PATH`, of `/etc/ld.so.conf` (and the files it includes), and the
//! usual library folders. The first file that opens and is not a shim is the loader.
//!
//! cl3 (which the backend makes its own calls through) opens `libOpenCL.so.1` by name; when that
//! name is this library, cl3 is pointed at the real loader through its `OPENCL_DYLIB_PATH`
//! before its first call ([`point_cl3_at_the_loader`], run as the library's constructor).

use std::ffi::{CStr, CString, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The shim's marker: a library that exports it is a shim, never the real loader.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static xsched_opencl_shim: [u8; 6] = *b"xsched";

const MARKER: &CStr = c"xsched_opencl_shim";
const LOADER: &str = "libOpenCL.so.1";
const FOLDERS: [&str; 6] = [
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// The real loader: its path and its `dlopen` handle.
pub(crate) struct Loader {
    /// Where it was found.
    pub(crate) path: PathBuf,
    handle: *mut c_void,
}

// SAFETY: a `dlopen` handle may be used from any thread (dlsym is thread-safe).
unsafe impl Send for Loader {}
// SAFETY: as above; the handle is never closed.
unsafe impl Sync for Loader {}

static LOADER_FOUND: OnceLock<Option<Loader>> = OnceLock::new();

/// The real loader, found once (`None`, said once in the log, when there is none).
pub(crate) fn loader() -> Option<&'static Loader> {
    LOADER_FOUND
        .get_or_init(|| {
            let found = candidates().into_iter().find_map(|p| open_loader(&p));
            if found.is_none() {
                tracing::error!(
                    "no OpenCL ICD loader ({LOADER}) found besides the xsched shim: install one \
                     (ocl-icd-libopencl1) or name it in XSCHED_OPENCL_LIBRARY"
                );
            }
            found
        })
        .as_ref()
}

/// The address of the real loader's function `name` (NUL-terminated), if it has one.
pub(crate) fn symbol(name: &str) -> Option<*mut c_void> {
    let loader = loader()?;
    let name = CStr::from_bytes_with_nul(name.as_bytes()).ok()?;
    // SAFETY: a live handle (never closed) and a NUL-terminated name.
    let address = unsafe { libc::dlsym(loader.handle, name.as_ptr()) };
    (!address.is_null()).then_some(address)
}

/// Every place the loader may be, in the order they are tried.
fn candidates() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("XSCHED_OPENCL_LIBRARY")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let mut folders: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    folders.extend(ld_so_conf(Path::new("/etc/ld.so.conf"), 0));
    folders.extend(FOLDERS.iter().map(PathBuf::from));
    paths.extend(folders.into_iter().map(|d| d.join(LOADER)));
    paths
}

/// The folders `/etc/ld.so.conf` names, following its `include` lines (a few levels deep).
fn ld_so_conf(file: &Path, depth: u32) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let mut folders = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(pattern) = line.strip_prefix("include ") {
            if depth < 3 {
                folders.extend(included(pattern.trim(), depth));
            }
        } else if line.starts_with('/') {
            folders.push(PathBuf::from(line));
        }
    }
    folders
}

/// The files an `include DIR/*.conf` line names (only a `*` in the file name is understood).
fn included(pattern: &str, depth: u32) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let (prefix, suffix) = name.split_once('*').unwrap_or((name, ""));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .flat_map(|f| ld_so_conf(f, depth + 1))
        .collect()
}

/// `path` opened, if it is a library that is not a shim.
fn open_loader(path: &Path) -> Option<Loader> {
    if !path.exists() {
        return None;
    }
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps its symbols out of the global scope.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: a live handle and a NUL-terminated name.
    if unsafe { !libc::dlsym(handle, MARKER.as_ptr()).is_null() } {
        // SAFETY: our own reference from the dlopen above.
        unsafe { libc::dlclose(handle) };
        return None;
    }
    Some(Loader {
        path: path.to_path_buf(),
        handle,
    })
}

/// When the name `libOpenCL.so.1` leads to a shim (this one, first on `LD_LIBRARY_PATH`),
/// point cl3 at the real loader through `OPENCL_DYLIB_PATH`, unless that is set already.
fn point_cl3_at_the_loader() {
    if std::env::var_os("OPENCL_DYLIB_PATH").is_some() || !name_leads_to_a_shim() {
        return;
    }
    let Some(loader) = loader() else { return };
    // SAFETY: run as the library's constructor, while the dynamic loader holds its lock: at a
    // program's start no other thread exists yet; when a running program opens the shim, a
    // thread reading the environment at this instant is the one risk, and the variable is set
    // once, before any code of the shim reads it.
    unsafe { std::env::set_var("OPENCL_DYLIB_PATH", &loader.path) };
}

/// Whether `dlopen("libOpenCL.so.1")` yields a library with the shim's marker.
fn name_leads_to_a_shim() -> bool {
    let name = c"libOpenCL.so.1";
    // SAFETY: a NUL-terminated name; the reference taken is dropped below.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: a live handle and a NUL-terminated name.
    let shim = unsafe { !libc::dlsym(handle, MARKER.as_ptr()).is_null() };
    // SAFETY: our own reference from the dlopen above.
    unsafe { libc::dlclose(handle) };
    shim
}

/// The library's constructor: runs when the shim is loaded, before any of its functions.
extern "C" fn on_load() {
    // No panic may leave a constructor.
    let _ = std::panic::catch_unwind(point_cl3_at_the_loader);
}

#[used]
// SAFETY: `.init_array` holds constructors; `on_load` takes no arguments and never unwinds.
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_so_conf_includes_are_followed() {
        let dir = std::env::temp_dir().join(format!("xsched-ldconf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).expect("dir");
        std::fs::write(
            dir.join("ld.so.conf"),
            format!(
                "/first\ninclude {}/conf.d/*.conf\n# a comment\n",
                dir.display()
            ),
        )
        .expect("write");
        std::fs::write(dir.join("conf.d/b.conf"), "/b\n").expect("write");
        std::fs::write(dir.join("conf.d/a.conf"), "/a\n").expect("write");
        std::fs::write(dir.join("conf.d/skip.txt"), "/no\n").expect("write");
        let folders = ld_so_conf(&dir.join("ld.so.conf"), 0);
        assert_eq!(
            folders,
            [
                PathBuf::from("/first"),
                PathBuf::from("/a"),
                PathBuf::from("/b")
            ]
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
