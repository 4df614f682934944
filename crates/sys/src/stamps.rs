//! Opt-in time stamps along a scheduling decision's path, so its latency across processes can
//! be measured by anyone (`XSCHED_STAMPS=<file>`; `scripts/bench-opencl.py --demotion` sets it
//! and pairs the stamps).
//!
//! Why: a decision that preempts another process crosses thread wake-ups in three processes
//! (the foreground's submit, the daemon, the background's agent and its device threads); its
//! latency is the time between stamps taken in different processes, which no single process
//! can time. Every stamp is one line `<what> <pid> <CLOCK_MONOTONIC ns>`, appended with one
//! `write(2)` to a file opened `O_APPEND` (so the lines of several processes never interleave),
//! and `CLOCK_MONOTONIC` is the same clock in every process of the machine.
//!
//! Off (the variable unset or empty) a stamp costs one atomic load: the file is looked up once.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::sync::OnceLock;

/// The variable naming the file stamps are appended to.
pub const STAMPS: &str = "XSCHED_STAMPS";

/// Where a decision's path has got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// A queue turned ready (on the submitting thread, as the submit reports it).
    Ready,
    /// The client agent wrote a queue's Ready to the daemon.
    ReadySent,
    /// The daemon decided on a Ready and wrote the operations it caused.
    Decided,
    /// A client agent received a suspend from the daemon.
    SuspendReceived,
    /// This process's device threads were demoted (Level 2 by thread priority).
    Demoted,
    /// This process's device threads were restored.
    Restored,
}

impl Stamp {
    /// The stamp's name in the file.
    pub fn name(self) -> &'static str {
        match self {
            Stamp::Ready => "ready",
            Stamp::ReadySent => "ready-sent",
            Stamp::Decided => "decided",
            Stamp::SuspendReceived => "suspend-received",
            Stamp::Demoted => "demoted",
            Stamp::Restored => "restored",
        }
    }
}

fn file() -> Option<&'static File> {
    static FILE: OnceLock<Option<File>> = OnceLock::new();
    FILE.get_or_init(|| open(std::env::var_os(STAMPS).as_deref()))
        .as_ref()
}

/// The stamps file at `path` (any bytes: a path need not be UTF-8), unless it is unset, blank
/// or cannot be opened (said once).
fn open(path: Option<&OsStr>) -> Option<File> {
    let path = path?;
    // Surrounding blanks of a UTF-8 path are dropped, as they always were.
    let path = path.to_str().map_or(path, |p| OsStr::new(p.trim()));
    if path.is_empty() {
        return None;
    }
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!("{STAMPS}={path:?} cannot be opened ({e}); no stamps are written");
            None
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the machine's clock, not the process's [`crate::clock`]).
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        let ns = i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec());
        u64::try_from(ns).unwrap_or(0)
    })
}

/// The line for `what` at `ns`.
fn line(what: Stamp, ns: u64) -> String {
    format!("{} {} {ns}\n", what.name(), std::process::id())
}

/// Record `what` now, if stamps are on.
pub fn stamp(what: Stamp) {
    if let Some(mut f) = file() {
        // One write of a short line to an O_APPEND file: whole, never interleaved. A failed
        // write loses one stamp of a measurement, nothing else.
        let _ = f.write_all(line(what, monotonic_ns()).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_empty_means_off() {
        assert!(open(None).is_none());
        for blank in ["", "  "] {
            assert!(open(Some(OsStr::new(blank))).is_none());
        }
    }

    #[test]
    fn an_unwritable_path_means_off() {
        assert!(open(Some(OsStr::new("/nonexistent-dir/xsched-stamps"))).is_none());
    }

    #[test]
    fn lines_name_the_stamp_the_process_and_the_machine_clock() {
        let ns = monotonic_ns();
        assert!(ns > 0);
        assert!(monotonic_ns() >= ns);
        assert_eq!(
            line(Stamp::Demoted, 42),
            format!("demoted {} 42\n", std::process::id())
        );
    }

    /// Set in the child of [`each_stamp_appends_one_line_to_the_file_the_variable_names`],
    /// which stamps (the file is looked up once per process, from its environment).
    const CHILD: &str = "XSCHED_TEST_STAMPS_CHILD";

    #[test]
    fn each_stamp_appends_one_line_to_the_file_the_variable_names() {
        if std::env::var_os(CHILD).is_some() {
            stamp(Stamp::Ready);
            stamp(Stamp::Restored);
            return;
        }
        use std::os::unix::ffi::OsStrExt;
        // A path that is not UTF-8 names a file like any other.
        let mut name = format!("xsched-stamps-{}-", std::process::id()).into_bytes();
        name.push(0xff);
        let path = std::env::temp_dir().join(OsStr::from_bytes(&name));
        let _ = std::fs::remove_file(&path);
        let exe = std::env::current_exe().expect("the test binary");
        let test = "stamps::tests::each_stamp_appends_one_line_to_the_file_the_variable_names";
        let out = std::process::Command::new(exe)
            .args(["--exact", test, "--nocapture"])
            .env(STAMPS, &path)
            .env(CHILD, "1")
            .output()
            .expect("run the child");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&path).expect("the child stamped");
        let _ = std::fs::remove_file(&path);
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        for (fields, name) in lines.iter().zip(["ready", "restored"]) {
            assert_eq!(fields.len(), 3, "{text}");
            assert_eq!(fields[0], name);
            assert_ne!(fields[1], std::process::id().to_string(), "the child's pid");
            assert!(fields[2].parse::<u64>().is_ok_and(|ns| ns > 0), "{text}");
        }
    }
}
