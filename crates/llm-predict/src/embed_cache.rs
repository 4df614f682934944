//! A file of embeddings already computed, so that a sweep with MiniLM (tens of milliseconds a
//! prompt on a small CPU: minutes for a ShareGPT run) pays for each prompt once per machine
//! instead of once per run.
//!
//! Only an embedder that names a [`Embedder::cache_fingerprint`] is cached (the hashed
//! embedding is cheaper to compute than to look up). The file, one per fingerprint
//! (`embeddings-<digest>.bin` in the cache folder), holds a header naming the fingerprint and
//! the dimension, then records of a prompt's SHA-256 (first 16 bytes) and its vector as
//! little-endian `f32`, so a cached vector is bit-identical to a computed one and results stay
//! the same with and without the cache. Concurrent runs share the file: each holds an exclusive
//! lock on it (`flock`) while it reads, repairs or starts it and while it appends a record. A
//! record cut short (a run killed mid-write, a full disk) is ignored and cut off, and a header
//! that does not match starts the file again, each with a warning.

use crate::PredictError;
use crate::embedding::Embedder;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &str = "xsched-embed-cache v1";
const KEY_BYTES: usize = 16;

/// The folder for caches: `XSCHED_CACHE_DIR`, else `$XDG_CACHE_HOME/xsched`, else
/// `$HOME/.cache/xsched`; `None` when none is set.
pub fn default_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("XSCHED_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("xsched")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/xsched")))
}

type Key = [u8; KEY_BYTES];
/// The vectors a cache file holds, by key.
type Vectors = HashMap<Key, Arc<[f32]>>;

fn key(text: &str) -> Key {
    let digest = Sha256::digest(text.as_bytes());
    let mut k = [0u8; KEY_BYTES];
    k.copy_from_slice(&digest[..KEY_BYTES]);
    k
}

/// `inner` with its vectors kept in a file.
pub struct Cached {
    inner: Box<dyn Embedder>,
    dim: usize,
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    known: Vectors,
    file: std::fs::File,
    hits: u64,
    misses: u64,
}

impl std::fmt::Debug for Cached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached").field("path", &self.path).finish()
    }
}

impl Cached {
    /// `inner` cached in `dir` if it names a fingerprint; otherwise `inner` unchanged.
    pub fn wrap(inner: Box<dyn Embedder>, dir: &Path) -> Result<Box<dyn Embedder>, PredictError> {
        let Some(fingerprint) = inner.cache_fingerprint().map(str::to_owned) else {
            return Ok(inner);
        };
        let probe = inner.embed(""); // the dimension; kept below like any vector
        let dim = probe.len();
        let digest = Sha256::digest(fingerprint.as_bytes());
        let name: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("embeddings-{name}.bin"));
        let fail = |source| PredictError::Cache {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        let header = format!("{MAGIC}\n{fingerprint}\n{dim}\n");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(fail)?;
        let known = open_locked(&mut file, &path, &header, dim).map_err(fail)?;
        tracing::info!(
            "embedding cache {}: {} vectors of {}",
            path.display(),
            known.len(),
            fingerprint
        );
        let cache = Cached {
            inner,
            dim,
            path,
            state: Mutex::new(State {
                known,
                file,
                hits: 0,
                misses: 0,
            }),
        };
        cache.keep(key(""), probe);
        Ok(Box::new(cache))
    }

    /// Remember `v` under `k`, in the file too, unless it is known already.
    fn keep(&self, k: Key, v: Arc<[f32]>) {
        if v.len() != self.dim || v.iter().all(|x| *x == 0.0) {
            // Another size would break the file's records; all zeros is an embedder's
            // could-not-embed fallback, to be tried again next time.
            return;
        }
        let mut record = Vec::with_capacity(KEY_BYTES + 4 * self.dim);
        record.extend_from_slice(&k);
        v.iter()
            .for_each(|x| record.extend_from_slice(&x.to_le_bytes()));
        let mut s = self.state();
        if s.known.insert(k, v).is_some() {
            return;
        }
        if let Err(e) = append_locked(&mut s.file, &record) {
            tracing::warn!("embedding cache {}: {e}; not kept", self.path.display());
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the map and file consistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Append one whole record under the file's lock; a failed write is cut off again, so the
/// records after it stay aligned.
fn append_locked(file: &mut std::fs::File, record: &[u8]) -> std::io::Result<()> {
    file.lock()?;
    let written = file.metadata().and_then(|m| {
        let before = m.len();
        file.write_all(record).inspect_err(|_| {
            let _ = file.set_len(before);
        })
    });
    file.unlock()?;
    written
}

/// Under the file's lock: its records, after starting it again if it is empty or another
/// embedder's, or cutting off a record cut short.
fn open_locked(
    file: &mut std::fs::File,
    path: &Path,
    header: &str,
    dim: usize,
) -> std::io::Result<Vectors> {
    file.lock()?;
    let loaded = load(file, path, header, dim).and_then(|(known, valid_len)| {
        let len = file.metadata()?.len();
        if valid_len == 0 {
            // New, or not ours (`load` said so): a header, then records.
            file.set_len(0)?;
            file.write_all(header.as_bytes())?;
        } else if valid_len < len {
            tracing::warn!(
                "embedding cache {}: {} bytes of a record cut short ignored",
                path.display(),
                len - valid_len
            );
            file.set_len(valid_len)?;
        }
        Ok(known)
    });
    file.unlock()?;
    loaded
}

/// The records of `file` if its header is `header`, and the length of its valid prefix (0 when
/// it is empty or has another header: it is started again).
fn load(
    file: &mut std::fs::File,
    path: &Path,
    header: &str,
    dim: usize,
) -> std::io::Result<(Vectors, u64)> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let Some(body) = bytes.strip_prefix(header.as_bytes()) else {
        if !bytes.is_empty() {
            tracing::warn!(
                "embedding cache {}: not a cache for this embedder; starting it again",
                path.display()
            );
        }
        return Ok((HashMap::new(), 0));
    };
    let record = KEY_BYTES + 4 * dim;
    let mut known = HashMap::with_capacity(body.len() / record);
    for r in body.chunks_exact(record) {
        let mut k = [0u8; KEY_BYTES];
        k.copy_from_slice(&r[..KEY_BYTES]);
        let v: Arc<[f32]> = r[KEY_BYTES..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        known.insert(k, v);
    }
    let whole = (body.len() / record * record + header.len()) as u64;
    Ok((known, whole))
}

impl Embedder for Cached {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn cache_fingerprint(&self) -> Option<&str> {
        self.inner.cache_fingerprint()
    }

    fn embed(&self, text: &str) -> Arc<[f32]> {
        let k = key(text);
        {
            let mut s = self.state();
            if let Some(v) = s.known.get(&k).cloned() {
                s.hits += 1;
                return v;
            }
        }
        // Computed outside the lock; two threads embedding one prompt both store the same bits.
        let v = self.inner.embed(text);
        self.state().misses += 1;
        self.keep(k, v.clone());
        v
    }
}

impl Drop for Cached {
    fn drop(&mut self) {
        let s = self.state();
        if s.misses > 0 {
            tracing::info!(
                "embedding cache {}: {} found, {} computed and kept",
                self.path.display(),
                s.hits,
                s.misses
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedding::Hashed;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The hashed embedding under a fingerprint, counting what it computes.
    struct Counting(Arc<AtomicUsize>);

    impl Embedder for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn cache_fingerprint(&self) -> Option<&str> {
            Some("counting v1")
        }
        fn embed(&self, text: &str) -> Arc<[f32]> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Hashed.embed(text)
        }
    }

    fn cached(dir: &Path) -> (Box<dyn Embedder>, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let e = Cached::wrap(Box::new(Counting(n.clone())), dir).expect("cache");
        n.store(0, Ordering::Relaxed); // the dimension probe
        (e, n)
    }

    fn file_in(dir: &Path) -> PathBuf {
        std::fs::read_dir(dir)
            .expect("dir")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "bin"))
            .expect("a cache file")
    }

    #[test]
    fn a_second_run_gets_the_same_bits_without_computing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let texts = ["Write a poem about the sea", "Explain TCP slow start"];
        let (first, computed) = cached(dir.path());
        let want: Vec<_> = texts.iter().map(|t| first.embed(t)).collect();
        assert_eq!(computed.load(Ordering::Relaxed), 2);
        assert_eq!(first.embed(texts[0]), want[0], "a hit in the same run");
        // The hashed embedding of no words is all zeros, an embedder's could-not-embed
        // answer: computed every time, never kept.
        first.embed("");
        assert_eq!(computed.load(Ordering::Relaxed), 3);
        drop(first);
        let (second, computed) = cached(dir.path());
        let got: Vec<_> = texts.iter().map(|t| second.embed(t)).collect();
        assert_eq!(got, want, "bit-identical from the file");
        assert_eq!(computed.load(Ordering::Relaxed), 0);
        second.embed("");
        assert_eq!(computed.load(Ordering::Relaxed), 1, "zeros were not kept");
        assert_eq!(got[0], Hashed.embed(texts[0]));
    }

    #[test]
    fn a_cut_record_is_ignored_and_cut_off_and_a_foreign_file_is_started_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (e, _) = cached(dir.path());
        e.embed("one");
        e.embed("two");
        drop(e);
        let path = file_in(dir.path());
        let full = std::fs::metadata(&path).expect("file").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(full - 10).expect("cut the last record");
        let (e, computed) = cached(dir.path());
        e.embed("one");
        assert_eq!(
            computed.load(Ordering::Relaxed),
            0,
            "the whole record survives"
        );
        e.embed("two");
        assert_eq!(
            computed.load(Ordering::Relaxed),
            1,
            "the cut one is computed again"
        );
        drop(e);
        assert_eq!(
            std::fs::metadata(&path).expect("file").len(),
            full,
            "aligned again"
        );
        std::fs::write(&path, b"something else").expect("overwrite");
        let (e, computed) = cached(dir.path());
        e.embed("one");
        assert_eq!(computed.load(Ordering::Relaxed), 1, "started again");
        drop(e);
        let (e, computed) = cached(dir.path());
        e.embed("one");
        assert_eq!(computed.load(Ordering::Relaxed), 0, "and kept from then on");
    }

    #[test]
    fn two_runs_sharing_the_file_keep_each_others_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a, _) = cached(dir.path());
        let (b, _) = cached(dir.path());
        a.embed("from a");
        b.embed("from b");
        a.embed("from a again");
        drop((a, b));
        let (c, computed) = cached(dir.path());
        for t in ["from a", "from b", "from a again"] {
            c.embed(t);
        }
        assert_eq!(
            computed.load(Ordering::Relaxed),
            0,
            "every record whole and aligned"
        );
    }

    #[test]
    fn an_embedder_without_a_fingerprint_is_not_cached() {
        let dir = tempfile::tempdir().expect("temp dir");
        let e = Cached::wrap(Box::new(Hashed), dir.path()).expect("no cache needed");
        e.embed("text");
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    }
}
