//! A kernel's first launch, which must not wait behind a gate.
//!
//! With lazy loading (the default since CUDA 12.2), the driver loads a kernel into the context at
//! its first launch, and "loading kernels might require context synchronization" (CUDA
//! programming guide, "Lazy Loading"); so may growing the context's local memory for a kernel
//! that needs more than any before it. Behind a gate that the XQueue opens only after the call
//! returns, such a synchronization would wait for ever. So each kernel's first launch (by handle:
//! a `CUfunction`, or a `CUkernel` passed as one) goes to the driver ungated, in stream order
//! after the gated commands before it, which the XQueues launch meanwhile; every later launch is
//! scheduled. The kernels seen are kept for the life of the process (a handle reused after its
//! module is unloaded counts as seen).

use std::collections::HashSet;
use std::sync::{LazyLock, Once, PoisonError, RwLock};

static SEEN: LazyLock<RwLock<HashSet<usize>>> = LazyLock::new(RwLock::default);

/// Whether this is the first launch of `kernel` in the process (then it is noted as seen); says
/// once per process, at info, that first launches run ungated.
pub(crate) fn first_sight(kernel: usize) -> bool {
    let seen = SEEN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&kernel);
    if seen {
        return false;
    }
    let first = SEEN
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(kernel);
    if first {
        static SAID: Once = Once::new();
        SAID.call_once(|| {
            tracing::info!(
                "xsched CUDA shim: a kernel's first launch may load it and synchronize the \
                 context, so it runs in stream order without a gate (unscheduled); later \
                 launches are scheduled"
            );
        });
    }
    first
}
