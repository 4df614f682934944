//! xsched's cache folder, by one rule for what keeps files between runs and can reach this crate
//! (`xsched run`'s stand-in folders, `xsched probe`'s last table, the OpenCL shim's kept kernel
//! sources). `xsched-llm-predict` (`embed_cache::default_dir`) follows the same rule with a copy
//! of its own: it sits below the runtime, which is no place for it to depend on.

use std::ffi::OsString;
use std::path::PathBuf;

/// The variable that names the cache folder outright.
const CACHE_DIR: &str = "XSCHED_CACHE_DIR";

/// xsched's cache folder: `$XSCHED_CACHE_DIR`, else `$XDG_CACHE_HOME/xsched`, else
/// `$HOME/.cache/xsched` (a variable set empty counts as unset); `None` when none is set.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(&|name: &str| std::env::var_os(name))
}

/// [`cache_dir`] with another variable source (for tests).
fn cache_dir_from(lookup: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let var = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(CACHE_DIR)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("xsched")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/xsched")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| {
            owned
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_cache_folder_is_named_outright_else_under_the_user_cache() {
        let all = [(CACHE_DIR, "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        let dir = |pairs: &[(&str, &str)]| cache_dir_from(&vars(pairs));
        assert_eq!(dir(&all), Some(PathBuf::from("/c")));
        assert_eq!(dir(&all[1..]), Some(PathBuf::from("/x/xsched")));
        assert_eq!(dir(&all[2..]), Some(PathBuf::from("/h/.cache/xsched")));
        assert_eq!(dir(&[]), None);
        let empty = [(CACHE_DIR, ""), ("XDG_CACHE_HOME", ""), ("HOME", "/h")];
        assert_eq!(
            dir(&empty),
            Some(PathBuf::from("/h/.cache/xsched")),
            "empty is unset"
        );
    }
}
