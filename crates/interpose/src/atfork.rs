//! The shims' `pthread_atfork` child handler: a forked child closes its parent's daemon
//! connections and builds its own shim state ([`crate::PerProcess`]).

#![allow(unsafe_code)]

use std::sync::Once;

extern "C" fn in_child() {
    xsched_runtime::fork::after_fork_in_child();
}

/// Register the child handler, once per process tree (a child inherits the registration).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `in_child` is a plain `extern "C"` function with no arguments; it only swaps
        // atomics and closes descriptors (async-signal-safe, as a child handler must be) and
        // cannot unwind. No prepare or parent handler is registered.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        if rc != 0 {
            tracing::warn!(
                "pthread_atfork failed ({rc}): a forked child will keep its parent's daemon \
                 connection"
            );
        }
    });
}
