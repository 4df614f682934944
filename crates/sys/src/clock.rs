//! xsched's monotonic clock, as the core's [`Nanos`].
//!
//! The core never reads a clock; the runtime and the daemon pass it this one. The epoch is the
//! first call in the process, so values are small and comparable across every thread of the
//! process.

use std::sync::OnceLock;
use std::time::Instant;
use xsched_core::Nanos;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Monotonic time since the process's clock epoch.
pub fn now() -> Nanos {
    Nanos(u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// The [`Instant`] that `t` stands for (for timed waits).
pub fn instant_of(t: Nanos) -> Instant {
    epoch() + std::time::Duration::from_nanos(t.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_round_trips() {
        let a = now();
        let b = now();
        assert!(b >= a);
        let i = instant_of(b);
        assert!(i <= Instant::now());
    }
}
