//! The kernel launches that must not wait behind a gate: a kernel's launches until it is loaded,
//! and every launch under `CUDA_LAUNCH_BLOCKING=1`.
//!
//! With lazy loading (the default since CUDA 12.2), the driver loads a kernel into a context at
//! its first launch there, and "loading kernels might require context synchronization" (CUDA
//! programming guide, "Lazy Loading"); so may growing the context's local memory for a kernel
//! that needs more than any before it. Behind a gate that the XQueue opens only after the call
//! returns, such a synchronization would wait for ever. So a kernel's launches in a context (by
//! handle: a `CUfunction`, or a context-independent `CUkernel` passed as one) go to the driver
//! ungated, in stream order after the gated commands before them, until one has returned
//! success there: two threads launching a new kernel at once both go ungated, and a failed first
//! launch does not count. Every later launch is scheduled. Unloading a module or a library, or
//! destroying a context, forgets every kernel (`across_unload`): the driver may hand a freed
//! kernel's address to a new kernel, whose first launch must go ungated too. So each kernel's
//! next launch after an unload is ungated once more, and while an unload is in progress every
//! launch is.
//!
//! Under `CUDA_LAUNCH_BLOCKING=1` (a debugging setting) the driver returns from each launch only
//! once its stream ran it, so every launch would wait behind its own gate: the backend's backstop
//! lets such a call through after `xsched_backend_cuda::SELF_BLOCK_AFTER` (milliseconds a
//! launch). Knowing the setting, the shim instead makes every launch ungated, in stream order:
//! the program's kernels then run unscheduled, as they run synchronously anyway.

use crate::real::Status;
use crate::state::current_context;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{LazyLock, Once, PoisonError, RwLock};

/// (context, kernel handle) pairs whose launch has returned success since the last unload.
static LOADED: LazyLock<RwLock<HashSet<(usize, usize)>>> = LazyLock::new(RwLock::default);

/// Unloads begun and ended: an unload is in progress while they differ. A freed kernel's
/// address can be handed out again only after its unload began.
static UNLOADS_BEGUN: AtomicU64 = AtomicU64::new(0);
static UNLOADS_ENDED: AtomicU64 = AtomicU64::new(0);

/// Run `unload` (a module, a library or a context going away) so that no kernel counts as
/// loaded across it: launches during it go ungated, and what was loaded is forgotten before it
/// counts as ended.
pub(crate) fn across_unload(unload: impl FnOnce() -> Status) -> Status {
    UNLOADS_BEGUN.fetch_add(1, SeqCst);
    let status = unload();
    LOADED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    UNLOADS_ENDED.fetch_add(1, SeqCst);
    status
}

/// Whether the driver makes every launch synchronous: `CUDA_LAUNCH_BLOCKING` is `1` (the
/// driver reads it once, at its initialization; so does the shim).
static LAUNCH_BLOCKING: LazyLock<bool> =
    LazyLock::new(|| std::env::var_os("CUDA_LAUNCH_BLOCKING").is_some_and(|v| v == "1"));

/// The rule for a launch of `kernel` (`gate::Ungated`): ungated, through `launch`, under
/// `CUDA_LAUNCH_BLOCKING=1` or until the kernel is loaded in the current context; then `None`
/// (gated).
pub(crate) fn launch_rule(kernel: usize, launch: &dyn Fn() -> Status) -> Option<Status> {
    if !*LAUNCH_BLOCKING {
        return until_loaded(kernel, launch);
    }
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            "xsched CUDA shim: CUDA_LAUNCH_BLOCKING=1 makes every kernel launch wait until it ran, \
             so launches go to the driver in stream order without a gate (unscheduled)"
        );
    });
    Some(launch())
}

/// Ungated, through `launch`, until the kernel is loaded in the current context; then `None`.
fn until_loaded(kernel: usize, launch: &dyn Fn() -> Status) -> Option<Status> {
    let id = (current_context(), kernel);
    let ended = UNLOADS_ENDED.load(SeqCst);
    let begun = UNLOADS_BEGUN.load(SeqCst);
    let loaded = begun == ended
        && LOADED
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id);
    if loaded {
        return None;
    }
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        tracing::info!(
            "xsched CUDA shim: a kernel's first launch in a context may load it and synchronize \
             the context, so it runs in stream order without a gate (unscheduled); later \
             launches are scheduled"
        );
    });
    let status = launch();
    // Loaded, unless an unload began meanwhile (it may have freed this very kernel).
    if status == 0 && UNLOADS_BEGUN.load(SeqCst) == ended {
        LOADED
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
    }
    Some(status)
}
