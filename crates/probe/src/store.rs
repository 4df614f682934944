//! Where probe tables are kept: the last one in xsched's cache directory, where `xsched devices`
//! finds it, and `xsched probe --out DIR`'s `probe.json` and `probe.md`. It is here, not in the
//! CLI, so that the command that writes the table and the one that reads it agree on the file;
//! every error names the file.

use crate::ProbeError;
use crate::table::ProbeTable;
use std::path::{Path, PathBuf};

/// xsched's cache directory, where the last probe is kept: `XSCHED_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/xsched`, else `$HOME/.cache/xsched` (the runtime's
/// [`cache_dir`](xsched_runtime::cache_dir)); `None` when none is set.
pub fn default_dir() -> Option<PathBuf> {
    xsched_runtime::cache_dir()
}

/// Where the last probe is kept, in xsched's cache directory `cache`.
pub fn last_path(cache: &Path) -> PathBuf {
    cache.join("probe.json")
}

/// Read the table at `path`.
pub fn read(path: &Path) -> Result<ProbeTable, ProbeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProbeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    ProbeTable::parse(&text, path)
}

/// The last probe kept in `cache`: `None` if none was kept yet (a kept file that cannot be read
/// is an error, not none).
pub fn last(cache: &Path) -> Result<Option<(PathBuf, ProbeTable)>, ProbeError> {
    let path = last_path(cache);
    if !path.exists() {
        return Ok(None);
    }
    read(&path).map(|table| Some((path, table)))
}

/// Keep `table` as the last probe in `cache` (created if missing); where.
pub fn keep(table: &ProbeTable, cache: &Path) -> Result<PathBuf, ProbeError> {
    let path = last_path(cache);
    write(&path, &json(table)?)?;
    Ok(path)
}

/// Write `table` into `dir` (created if missing) as `probe.json` and `probe.md` (for the
/// benchmark record); the files written.
pub fn write_out(table: &ProbeTable, dir: &Path) -> Result<Vec<PathBuf>, ProbeError> {
    [("probe.json", json(table)?), ("probe.md", table.markdown())]
        .into_iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            write(&path, &text).map(|()| path)
        })
        .collect()
}

/// The table as it is kept: pretty JSON and a newline.
fn json(table: &ProbeTable) -> Result<String, ProbeError> {
    Ok(serde_json::to_string_pretty(table).map_err(ProbeError::Encode)? + "\n")
}

/// Write `text` to `path`, creating its directory.
fn write(path: &Path, text: &str) -> Result<(), ProbeError> {
    path.parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, text))
        .map_err(|source| ProbeError::Write {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::FORMAT;

    fn table() -> ProbeTable {
        ProbeTable {
            format: FORMAT,
            taken_unix_s: 7,
            machine: "m".into(),
            xsched: "0".into(),
            samples: 1,
            repeats: 1,
            backends: Vec::new(),
        }
    }

    #[test]
    fn a_kept_table_is_the_last_one_and_out_writes_both_files() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = dir.path().join("cache");
        assert!(last(&cache).expect("no file is no error").is_none());
        let kept = keep(&table(), &cache).expect("kept");
        let (path, read_back) = last(&cache).expect("readable").expect("kept");
        assert_eq!((path, read_back), (kept, table()));
        let out = write_out(&table(), &dir.path().join("out")).expect("written");
        let names: Vec<_> = out.iter().filter_map(|p| p.file_name()).collect();
        assert_eq!(names, ["probe.json", "probe.md"]);
        assert_eq!(read(&out[0]).expect("JSON"), table());
    }

    #[test]
    fn a_kept_file_that_is_not_a_table_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(last_path(dir.path()), "{\"format\": 1}").expect("write");
        let err = last(dir.path()).expect_err("malformed");
        assert!(matches!(err, ProbeError::Malformed { .. }), "{err:?}");
        assert!(err.to_string().contains("probe.json"), "{err}");
        let missing = read(&dir.path().join("none.json")).expect_err("missing");
        assert!(matches!(missing, ProbeError::Read { .. }), "{missing:?}");
    }
}
