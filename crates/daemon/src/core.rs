//! The daemon's scheduler: one [`Dispatcher`] behind a mutex, driven inline by the connection
//! threads (an event and the operations it causes cost one thread wake-up: the reader's), plus
//! a timer thread for policies that ask for the clock.

use std::sync::{Condvar, Mutex, MutexGuard};
use xsched_core::Nanos;
use xsched_runtime::clock;
use xsched_runtime::scheduler::Dispatcher;

struct Inner {
    dispatcher: Dispatcher,
    /// The deadline the timer thread sleeps until, if any.
    armed: Option<Nanos>,
    stopping: bool,
}

/// The shared scheduler.
pub(crate) struct Core {
    inner: Mutex<Inner>,
    timer: Condvar,
}

impl Core {
    pub(crate) fn new(dispatcher: Dispatcher) -> Core {
        Core {
            inner: Mutex::new(Inner {
                dispatcher,
                armed: None,
                stopping: false,
            }),
            timer: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `f` on the dispatcher, apply the operations it caused, and wake the timer thread if
    /// the policy now wants the clock sooner.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Dispatcher) -> R) -> R {
        let mut inner = self.lock();
        let r = f(&mut inner.dispatcher);
        inner.dispatcher.dispatch();
        let next = inner.dispatcher.next_timer();
        if next.is_some_and(|n| inner.armed.is_none_or(|a| n < a)) {
            self.timer.notify_one();
        }
        r
    }

    /// The timer thread's body: sleep until the policy's next timer, fire it, repeat.
    pub(crate) fn run_timers(&self) {
        let mut inner = self.lock();
        loop {
            if inner.stopping {
                inner.dispatcher.resume_all();
                return;
            }
            let next = inner.dispatcher.next_timer();
            inner.armed = next;
            let now = clock::now();
            inner = match next {
                Some(t) if t <= now => {
                    inner.dispatcher.timeout(now);
                    inner.dispatcher.dispatch();
                    continue;
                }
                Some(t) => {
                    let wait = std::time::Duration::from_nanos(t.saturating_sub(now).0);
                    self.timer
                        .wait_timeout(inner, wait)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
                None => self
                    .timer
                    .wait(inner)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }

    /// Stop the timer thread (it resumes every queue on its way out).
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.timer.notify_one();
    }
}
