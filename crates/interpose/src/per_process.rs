//! The shim's state, one per process: a forked child gets its own instead of its parent's.
//!
//! A preloaded shim keeps its interposer in a static. After `fork` the child's copy of that
//! static describes the parent's runtime, whose threads do not exist in the child; the child must
//! start clean. The shim's `pthread_atfork` child handler calls
//! [`xsched_runtime::fork::after_fork_in_child`], which counts the fork, and [`PerProcess::get`]
//! then builds a new value for the child (the parent's copy is left alone, never dropped).
//! The usual call costs two atomic loads.

use std::sync::OnceLock;
use xsched_runtime::fork::process_generation;

/// How deep a chain of forks gets its own state (a server forking workers is one deep); deeper
/// children go without (the shim forwards every call).
const DEPTH: usize = 8;

/// A value built once per process.
pub struct PerProcess<T> {
    by_generation: [OnceLock<T>; DEPTH],
}

impl<T> PerProcess<T> {
    /// Nothing built yet.
    pub const fn new() -> PerProcess<T> {
        PerProcess {
            by_generation: [const { OnceLock::new() }; DEPTH],
        }
    }

    /// This process's value, built by `init` on first use in this process; `None` in a child
    /// more than [`DEPTH`] forks deep.
    pub fn get(&self, init: impl FnOnce() -> T) -> Option<&T> {
        let generation = usize::try_from(process_generation()).unwrap_or(usize::MAX);
        Some(self.by_generation.get(generation)?.get_or_init(init))
    }
}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        PerProcess::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_gets_a_value_of_its_own() {
        static STATE: PerProcess<u64> = PerProcess::new();
        let parent = *STATE.get(|| 1).expect("built");
        assert_eq!(*STATE.get(|| 99).expect("kept"), parent);
        // What a shim's child handler does.
        xsched_runtime::fork::after_fork_in_child();
        assert_eq!(*STATE.get(|| 2).expect("the child's own"), 2);
        assert_eq!(*STATE.get(|| 3).expect("kept"), 2);
    }
}
