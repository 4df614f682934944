//! Context switches of this process (all its threads), for "wake-ups per command": every time a
//! thread blocks and another runs, the kernel counts a switch (voluntary when the thread
//! waited, involuntary when it was preempted). `getrusage(RUSAGE_SELF)` sums them over threads.

use nix::sys::resource::{UsageWho, getrusage};

/// Voluntary plus involuntary context switches of this process so far (0 if unreadable).
pub fn so_far() -> u64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| {
        u64::try_from(u.voluntary_context_switches() + u.involuntary_context_switches())
            .unwrap_or(0)
    })
}

/// Context switches while `f` ran, and its result.
pub fn during<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = so_far();
    let r = f();
    (so_far().saturating_sub(before), r)
}
