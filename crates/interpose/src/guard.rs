//! No panic may unwind into the application: the xsched part of an intercepted call runs under
//! `catch_unwind`, and on an internal failure the call goes straight to the real library — once:
//! a call already made is never repeated.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Run `scheduled`, which makes the real call through the function it is given at most once and
/// returns its status (`S`: the API's status code); if `scheduled` panics, return the call's
/// status if it was made, else make it now with `forward`. `library` names the shim in the log.
pub fn call<S: Copy>(
    library: &str,
    scheduled: impl FnOnce(&dyn Fn() -> S) -> S,
    forward: &dyn Fn() -> S,
) -> S {
    call_made(library, |made| scheduled(&|| made(forward())), forward)
}

/// Like [`call`] for a call whose real form the scheduled path makes itself (with arguments of
/// its own): it reports the status it got through `made`, so that a panic after it forwards
/// nothing.
pub fn call_made<S: Copy>(
    library: &str,
    scheduled: impl FnOnce(&dyn Fn(S) -> S) -> S,
    forward: &dyn Fn() -> S,
) -> S {
    let made: Cell<Option<S>> = Cell::new(None);
    let record = |status: S| {
        made.set(Some(status));
        status
    };
    match catch_unwind(AssertUnwindSafe(|| scheduled(&record))) {
        Ok(status) => status,
        Err(_) => {
            tracing::error!("internal panic in the {library} shim: call forwarded");
            made.get().unwrap_or_else(forward)
        }
    }
}

/// Run an xsched-side step whose failure must not affect the application.
pub fn quietly(library: &str, what: &str, step: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(step)).is_err() {
        tracing::error!("internal panic in the {library} shim while {what}; ignored");
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
        assert_eq!(call("test", |_| panic!("before"), &forward), 7);
        assert_eq!(calls.get(), 1);
        let after = |f: &dyn Fn() -> i32| {
            f();
            panic!("after")
        };
        assert_eq!(call("test", after, &forward), 7);
        assert_eq!(calls.get(), 2, "never called twice");
        assert_eq!(call("test", |f| f() + 1, &forward), 8);
        // The scheduled path made its own form of the call and said so: not repeated.
        let own = |made: &dyn Fn(i32) -> i32| {
            made(3);
            panic!("after its own call")
        };
        assert_eq!(call_made("test", own, &forward), 3);
        assert_eq!(calls.get(), 3, "only the forwarded calls above");
        assert_eq!(call_made("test", |_| panic!("before"), &forward), 7);
        quietly("test", "testing", || panic!("contained"));
    }
}
