//! How much CPU control threads may use at real-time priority: each thread's own allowance, and
//! the process's, which all its control threads share, counted in one lock-free word per window.
//! Kept apart from the guard so that the word's arithmetic can be read and tested on its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How much CPU a prompt thread may use per window before it loses real-time priority.
pub(super) const CPU_PER_WINDOW: Duration = Duration::from_millis(20);

/// The window [`CPU_PER_WINDOW`] is counted over (20 %).
pub(super) const WINDOW: Duration = Duration::from_millis(100);

/// How much CPU a process's control threads may use together at real-time priority per
/// [`WINDOW`]: as much as one of them. Past it each goes normal at its next check until the
/// window ends, so that many threads each under its own allowance (the daemon's connection
/// threads of many flooding clients) cannot take more than one thread may.
pub(super) const PROCESS_CPU_PER_WINDOW: Duration = CPU_PER_WINDOW;

/// Bits of a [`Budget`] word that count µs (the rest number the window).
const USED_BITS: u32 = 40;
const USED_MASK: u64 = (1 << USED_BITS) - 1;

/// The CPU a process's control threads used at real-time priority in the current [`WINDOW`],
/// in one word (lock-free): the window's number (its low 24 bits) above 40 bits of µs.
#[derive(Debug)]
pub(super) struct Budget(AtomicU64);

/// The number of the [`WINDOW`] that `now` (the process's clock) falls in.
pub(super) fn window_of(now: Duration) -> u64 {
    u64::try_from(now.as_nanos() / WINDOW.as_nanos()).unwrap_or(u64::MAX)
}

impl Budget {
    pub(super) const fn new() -> Budget {
        Budget(AtomicU64::new(0))
    }

    fn tag(window: u64) -> u64 {
        window & (u64::MAX >> USED_BITS)
    }

    /// Count `used` in window `window` (a new window starts from zero); its total now.
    pub(super) fn spend(&self, window: u64, used: Duration) -> Duration {
        let tag = Budget::tag(window);
        let add = u64::try_from(used.as_micros()).unwrap_or(USED_MASK);
        let mut total = 0;
        // The closure always returns Some: the update cannot fail.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let before = if word >> USED_BITS == tag {
                    word & USED_MASK
                } else {
                    0
                };
                total = before.saturating_add(add).min(USED_MASK);
                Some(tag << USED_BITS | total)
            });
        Duration::from_micros(total)
    }

    /// What window `window` used so far.
    pub(super) fn spent(&self, window: u64) -> Duration {
        let word = self.0.load(Ordering::Relaxed);
        if word >> USED_BITS == Budget::tag(window) {
            Duration::from_micros(word & USED_MASK)
        } else {
            Duration::ZERO
        }
    }
}
