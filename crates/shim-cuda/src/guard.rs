//! No panic may unwind into the application: the xsched part of every exported function runs
//! under `catch_unwind`, and on an internal failure the call goes straight to the driver (once:
//! a call already made is never repeated).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A driver status code, as the C API returns it (kept as a plain integer: the application gets
/// exactly what the driver said).
pub(crate) type Status = u32;

/// `CUDA_ERROR_NOT_FOUND`: what an entry point the driver lacks returns.
pub(crate) const NOT_FOUND: Status = 500;

/// Run `scheduled`, which makes the driver call through `forward` at most once; if it panics,
/// return the call's status if it was made, else make it now.
pub(crate) fn call(
    scheduled: impl FnOnce(&dyn Fn() -> Status) -> Status,
    forward: &dyn Fn() -> Status,
) -> Status {
    let made: Cell<Option<Status>> = Cell::new(None);
    let once = || {
        let status = forward();
        made.set(Some(status));
        status
    };
    match catch_unwind(AssertUnwindSafe(|| scheduled(&once))) {
        Ok(status) => status,
        Err(_) => {
            tracing::error!("internal panic in the CUDA shim: call forwarded");
            made.get().unwrap_or_else(forward)
        }
    }
}

/// Run an xsched-side step whose failure must not affect the application.
pub(crate) fn quietly(what: &str, step: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(step)).is_err() {
        tracing::error!("internal panic in the CUDA shim while {what}; ignored");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_before_the_call_forwards_and_after_it_keeps_the_status() {
        let calls = Cell::new(0);
        let forward = || {
            calls.set(calls.get() + 1);
            7
        };
        assert_eq!(call(|_| panic!("before"), &forward), 7);
        assert_eq!(calls.get(), 1);
        let after = |f: &dyn Fn() -> Status| {
            f();
            panic!("after")
        };
        assert_eq!(call(after, &forward), 7);
        assert_eq!(calls.get(), 2, "never called twice");
        assert_eq!(call(|f| f() + 1, &forward), 8);
    }
}
