//! What a forked child must not inherit from its parent's runtime.
//!
//! `fork` copies the process's memory but only the calling thread: in the child, the parent's
//! launcher, scheduler and agent threads do not exist, yet the child holds copies of every
//! descriptor, among them the agent's connection to the daemon. A child that keeps that
//! connection open keeps its parent's queues registered after the parent dies, and nobody in the
//! child would ever read or answer it.
//!
//! So the agent records the descriptors of its connection here, in fixed slots that need no
//! lock, and a shim's `pthread_atfork` child handler calls [`after_fork_in_child`]: it closes
//! them (`close` is async-signal-safe) and counts one more fork in [`process_generation`], which
//! tells the shim that its runtime is the parent's and that this process needs its own. The
//! parent's runtime is left alone in the child (its threads are gone; dropping it would wait for
//! them forever). `exec` needs none of this: every socket the runtime opens is close-on-exec.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Descriptors tracked at once (two per agent connection; a process has one agent per runtime).
const SLOTS: usize = 32;

static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// How many forks lie between the process that loaded the runtime and this one (0 in the
/// original; each child counts one more than its parent).
pub fn process_generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// In a forked child, before it does anything else: close the parent's agent connections,
/// let the child's control threads sample the machine even if a parent thread was sampling at
/// the fork ([`crate::prompt`]), and count the fork. Async-signal-safe (atomics and `close`
/// only), as a `pthread_atfork` child handler must be.
pub fn after_fork_in_child() {
    for slot in &FDS {
        let fd = slot.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            let _ = nix::unistd::close(fd);
        }
    }
    crate::prompt::after_fork_in_child();
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// A descriptor a forked child must close; untracked when dropped (declare it before the
/// stream it tracks, so it is untracked before the descriptor closes).
pub struct Tracked(Option<usize>, RawFd);

impl Tracked {
    /// Track `fd`'s descriptor (if all slots are taken, it is not tracked: logged once).
    pub fn new(fd: &impl AsRawFd) -> Tracked {
        let raw = fd.as_raw_fd();
        let slot = FDS.iter().position(|s| {
            s.compare_exchange(-1, raw, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if slot.is_none() {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "more than {SLOTS} daemon connections: a forked child may keep some"
                );
            });
        }
        Tracked(slot, raw)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let _ = FDS[i].compare_exchange(self.1, -1, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn tracked_descriptors_are_closed_in_a_child_and_untracked_when_dropped() {
        let (a, mut b) = UnixStream::pair().expect("pair");
        let (c, _d) = UnixStream::pair().expect("pair");
        let tracked = Tracked::new(&a);
        let dropped = Tracked::new(&c);
        drop(dropped);
        let before = process_generation();
        // What the child handler does (here in this process, so `a`'s descriptor closes).
        after_fork_in_child();
        assert_eq!(process_generation(), before + 1);
        use std::io::Read;
        let mut buf = [0u8; 1];
        assert_eq!(
            b.read(&mut buf).expect("peer closed"),
            0,
            "a's descriptor was closed"
        );
        // `c` was untracked: still open.
        assert!(c.peer_addr().is_ok());
        drop(tracked);
        // `a` would close its (already closed) descriptor on drop: forget it instead.
        std::mem::forget(a);
    }
}
