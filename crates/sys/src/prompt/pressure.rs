//! Whether threads wait for the machine's CPUs: a process's sampler of its CPU pressure
//! (`/proc/pressure/cpu`, PSI), shared by its control threads without a lock, and the answer
//! each window gives, with hysteresis. Kept apart from the guard that asks it so that the
//! sampling rule (at most once a window per process, no judgement from a stale sample) can be
//! read and tested on its own.

use super::env::RT_CONTROL;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often a process samples the machine's CPU pressure, at most.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The first window of a process, or after a stale sample: short, so that a change is seen
/// soon (until then the answer stays as it was: normal, in a process's first window).
pub(super) const FIRST_WINDOW: Duration = Duration::from_millis(20);

/// A sample older than this is not used as the start of a window (see [`next`]).
pub(super) const STALE_AFTER: Duration = Duration::from_millis(400);

/// Contended: some runnable thread waited for a CPU at least this share of the window.
pub const CONTENDED_AT: f64 = 0.20;

/// No longer contended once threads waited less than this share (hysteresis).
const QUIET_BELOW: f64 = 0.05;

/// Whether the CPUs count as contended after a window of `window_us` in which some runnable
/// thread waited for a CPU `stalled_us`, given whether they did before: from [`CONTENDED_AT`]
/// of the window they are, below [`QUIET_BELOW`] they are not, in between they stay as they
/// were. An empty window changes nothing.
pub fn contended(before: bool, stalled_us: u64, window_us: u64) -> bool {
    if window_us == 0 {
        return before;
    }
    let share = stalled_us as f64 / window_us as f64;
    if share >= CONTENDED_AT {
        true
    } else if share < QUIET_BELOW {
        false
    } else {
        before
    }
}

/// The machine's total time (µs) that some runnable thread waited for a CPU, or `None` without
/// pressure accounting.
pub(super) fn cpu_stall_us() -> Option<u64> {
    parse_pressure(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// The `total=` of the `some` line of a pressure file.
pub(super) fn parse_pressure(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// A look at the machine's CPU pressure, which starts a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PressureSample {
    /// When (the process's clock).
    pub(super) at: Duration,
    /// The machine's stall total then (µs).
    pub(super) stall_us: u64,
    /// How long the window it starts lasts at least.
    pub(super) window: Duration,
}

/// Whether a look at `now` samples the machine: there is no sample yet, or its window is over.
pub(super) fn due(last: Option<PressureSample>, now: Duration) -> bool {
    last.is_none_or(|s| now.saturating_sub(s.at) >= s.window)
}

/// What a sample of `stall_us` taken at `now` says after `last`, given whether the CPUs were
/// contended `before`: whether they are now, and the sample that starts the next window. With
/// no recent sample to end a window with (the process's first look, or a last one older than
/// [`STALE_AFTER`], whose window would average over a past that may have been quiet), the
/// answer stays as it was and a short first window starts.
pub(super) fn next(
    last: Option<PressureSample>,
    now: Duration,
    stall_us: u64,
    before: bool,
) -> (bool, PressureSample) {
    let fresh = last.filter(|s| now.saturating_sub(s.at) <= STALE_AFTER);
    let (busy, window) = match fresh {
        Some(s) => {
            let window_us = u64::try_from(now.saturating_sub(s.at).as_micros()).unwrap_or(u64::MAX);
            let stalled_us = stall_us.saturating_sub(s.stall_us);
            (contended(before, stalled_us, window_us), SAMPLE_EVERY)
        }
        None => (before, FIRST_WINDOW),
    };
    let sample = PressureSample {
        at: now,
        stall_us,
        window,
    };
    (busy, sample)
}

/// A process's view of the machine, shared by its control threads: the last sample and its
/// answer. Plain atomics, no lock: the thread that wins `sampling` samples, the others read the
/// last answer, and a forked child whose parent was sampling at the fork can start again
/// ([`after_fork_in_child`](super::after_fork_in_child)).
#[derive(Debug)]
pub(super) struct Machine {
    /// Held by the thread sampling now.
    pub(super) sampling: AtomicBool,
    /// The last [`PressureSample`]'s fields (`window_ns` 0: none yet); only the sampling thread
    /// uses them.
    at_ns: AtomicU64,
    stall_us: AtomicU64,
    window_ns: AtomicU64,
    /// The last answer.
    contended: AtomicBool,
    /// No pressure accounting here: never sampled again.
    no_psi: AtomicBool,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Machine {
    pub(super) const fn new() -> Machine {
        Machine {
            sampling: AtomicBool::new(false),
            at_ns: AtomicU64::new(0),
            stall_us: AtomicU64::new(0),
            window_ns: AtomicU64::new(0),
            contended: AtomicBool::new(false),
            no_psi: AtomicBool::new(false),
        }
    }

    pub(super) fn last(&self) -> Option<PressureSample> {
        let window = self.window_ns.load(Ordering::Relaxed);
        (window > 0).then(|| PressureSample {
            at: Duration::from_nanos(self.at_ns.load(Ordering::Relaxed)),
            stall_us: self.stall_us.load(Ordering::Relaxed),
            window: Duration::from_nanos(window),
        })
    }

    fn keep(&self, s: PressureSample) {
        self.at_ns.store(ns(s.at), Ordering::Relaxed);
        self.stall_us.store(s.stall_us, Ordering::Relaxed);
        self.window_ns.store(ns(s.window).max(1), Ordering::Relaxed);
    }

    /// Whether threads wait for the machine's CPUs at `now`, sampled (with `read`, the stall
    /// total) at most once a window per process. Without pressure accounting the answer is no,
    /// and the file is not read again (said once).
    pub(super) fn contended(&self, now: Duration, read: impl FnOnce() -> Option<u64>) -> bool {
        if self.no_psi.load(Ordering::Relaxed) {
            return false;
        }
        // Plain loads first: most checks fall inside the window and need not touch the flag
        // every control thread shares.
        if !due(self.last(), now) {
            return self.contended.load(Ordering::Relaxed);
        }
        if self
            .sampling
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let last = self.last();
            if due(last, now) {
                match read() {
                    Some(stall_us) => {
                        let before = self.contended.load(Ordering::Relaxed);
                        let (busy, sample) = next(last, now, stall_us, before);
                        self.contended.store(busy, Ordering::Relaxed);
                        self.keep(sample);
                    }
                    None => {
                        self.no_psi.store(true, Ordering::Relaxed);
                        tracing::info!(
                            "{RT_CONTROL}=auto: no /proc/pressure/cpu, control threads stay normal"
                        );
                    }
                }
            }
            self.sampling.store(false, Ordering::Release);
        }
        self.contended.load(Ordering::Relaxed)
    }

    /// Whether sampling can tell anything (false once pressure accounting proved absent).
    pub(super) fn can_tell(&self) -> bool {
        !self.no_psi.load(Ordering::Relaxed)
    }
}
