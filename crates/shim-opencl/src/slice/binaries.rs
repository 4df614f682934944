//! The source behind a program binary. Frameworks compile source, take the binary
//! (`clGetProgramInfo(CL_PROGRAM_BINARIES)`), and load kernels from it
//! (`clCreateProgramWithBinary`), often from a disk cache in a later run: tinygrad does all three.
//! A twin needs source, so each binary read from a program made from source is remembered by its
//! SHA-256, in the process and as a file under the xsched cache
//! (`~/.cache/xsched/opencl-sources/<sha256>.cl`), and a program made from that binary is
//! sliced as if made from the source. A binary never seen with its source gets no twin.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Sources by their binaries' digests, in this process.
static SEEN: Mutex<Option<HashMap<[u8; 32], String>>> = Mutex::new(None);

fn digest(binary: &[u8]) -> [u8; 32] {
    Sha256::digest(binary).into()
}

/// Where sources are kept between runs (`None`: no cache folder).
fn folder() -> Option<PathBuf> {
    Some(xsched_runtime::cache_dir()?.join("opencl-sources"))
}

fn file_of(key: &[u8; 32]) -> Option<PathBuf> {
    let name: String = key.iter().map(|b| format!("{b:02x}")).collect();
    Some(folder()?.join(format!("{name}.cl")))
}

/// `binary` was built from `source`.
pub(crate) fn remember(binary: &[u8], source: &str) {
    let key = digest(binary);
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.get_or_insert_with(HashMap::new)
        .insert(key, source.to_string());
    drop(seen);
    if let Some(file) = file_of(&key).filter(|f| !f.exists()) {
        // Written whole under another name, then renamed: a reader never sees half a source.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let _ = file
            .parent()
            .map(std::fs::create_dir_all)
            .transpose()
            .and_then(|_| std::fs::write(&tmp, source))
            .and_then(|()| std::fs::rename(&tmp, &file));
    }
}

/// The source `binary` was built from, if it was seen (in this process or an earlier one).
pub(crate) fn source_of(binary: &[u8]) -> Option<String> {
    let key = digest(binary);
    let seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(source) = seen.as_ref().and_then(|m| m.get(&key)) {
        return Some(source.clone());
    }
    drop(seen);
    std::fs::read_to_string(file_of(&key)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_leads_back_to_its_source_and_another_does_not() {
        remember(b"\x7fELF binary one", "kernel void a() {}");
        assert_eq!(
            source_of(b"\x7fELF binary one").as_deref(),
            Some("kernel void a() {}")
        );
        assert_eq!(source_of(b"\x7fELF binary two, never seen"), None);
    }
}
