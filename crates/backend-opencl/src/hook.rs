//! Refill on OpenCL's callback thread: the queue keeps the XQueue's
//! [`CompletionHook`] and, after a command's event callback reported its completion, runs the
//! hook right there when a synchronization point left work for it, so the observation and the
//! launches it allows happen on the implementation's callback thread instead of waking the
//! queue's launcher thread.
//!
//! What makes this safe in a callback: the refill's launches only enqueue (or open a gate),
//! retain and release events and register callbacks, which OpenCL allows inside a callback; none
//! of them waits (`clFinish`, `clWaitForEvents` and blocking enqueues are undefined there, so
//! [`OclCommand::Enqueue`](crate::OclCommand::Enqueue) functions must not block). Checked on
//! POCL 3.1, where callbacks run on the device's worker threads and, for a command that
//! finished before its callback was registered, synchronously inside `clSetEventCallback`.
//! Three cases run the hook elsewhere:
//!
//! - A completion reported from inside `launch` on this thread (the synchronous case above):
//!   the queue's lock is held there, so the hook cannot run. Within a refill, it runs again on
//!   this thread once the refill returned; otherwise (the launcher or an application thread
//!   launched) the work goes to the launcher thread ([`CompletionHook::hand_over`]).
//! - A process demoted for a Level-2 hold (`demote.rs`): callback threads are the device's own
//!   threads, at `SCHED_IDLE` then, and one preempted while holding the queue's lock would stall
//!   the resume; the launcher thread (never demoted) takes the work. A hold that begins after
//!   that check spares the refilling thread until its refill (and so its hold of the queue's
//!   lock) is over, and then demotes it; callback threads are not exempted for good by
//!   refilling, so a hold still holds the device's threads.
//! - A callback that cannot be registered: the command fails as before, and the queue gives
//!   its hook back, so the launcher thread refills it from then on (logged once).

use crate::demote;
use crate::error::OclError;
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};
use xsched_runtime::CompletionHook;

/// A queue's completion hook, shared with its commands' event callbacks.
#[derive(Default)]
pub(crate) struct HookSlot(Mutex<Option<Arc<CompletionHook>>>);

impl HookSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<CompletionHook>>> {
        // A panic elsewhere cannot leave the slot half-written.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keep `hook` (replacing an earlier one).
    pub(crate) fn set(&self, hook: CompletionHook) {
        *self.lock() = Some(Arc::new(hook));
    }

    /// Give the hook back after `why` (once: later calls find the slot empty). The runtime
    /// then refills from the launcher thread, with whatever was due.
    pub(crate) fn give_back(&self, why: &OclError) {
        let hook = self.lock().take();
        if hook.is_some() {
            tracing::warn!("OpenCL queue: {why}; its completion hook is given back");
        }
    }
}

thread_local! {
    /// This thread is inside `OclQueue::launch` (and so inside the queue's lock).
    static LAUNCHING: Cell<bool> = const { Cell::new(false) };
    /// This thread is running a completion hook (a refill from a callback).
    static REFILLING: Cell<bool> = const { Cell::new(false) };
    /// Hooks that became due inside a launch of the refill on this thread, to run after it.
    static AFTER_REFILL: RefCell<Vec<Arc<CompletionHook>>> = const { RefCell::new(Vec::new()) };
}

/// Sets a thread-local flag for the guard's life, restoring the previous value when dropped
/// (a panic included).
struct Flag(&'static std::thread::LocalKey<Cell<bool>>, bool);

impl Flag {
    fn raise(key: &'static std::thread::LocalKey<Cell<bool>>) -> Flag {
        Flag(key, key.replace(true))
    }
}

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

/// Run `launch` (the body of `OclQueue::launch`) with this thread marked as launching.
pub(crate) fn launching<R>(launch: impl FnOnce() -> R) -> R {
    let _flag = Flag::raise(&LAUNCHING);
    launch()
}

/// Whether this thread takes the queue's lock to refill from a callback (see the module docs:
/// such a thread is spared from a Level-2 demotion only while it refills).
pub(crate) fn refilling() -> bool {
    REFILLING.get()
}

/// After a completion of the slot's queue was reported on this thread: do what it left for
/// the hook, here or (see the module docs) by the launcher thread.
pub(crate) fn after_completion(slot: &HookSlot) {
    let Some(hook) = slot.lock().clone().filter(|h| h.is_due()) else {
        return;
    };
    if REFILLING.get() {
        // Inside this thread's refill (its launch): the refill's loop below runs it next.
        AFTER_REFILL.with_borrow_mut(|left| left.push(hook));
        return;
    }
    if LAUNCHING.get() || demote::demoted() {
        hook.hand_over();
        return;
    }
    // Spared from a hold that begins now, until the refill (and its queue lock) is over.
    demote::spared_while(|| {
        let _flag = Flag::raise(&REFILLING);
        hook.run();
        while let Some(next) = AFTER_REFILL.with_borrow_mut(Vec::pop) {
            next.run();
        }
    });
}
