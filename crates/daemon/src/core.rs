//! The daemon's scheduler: one core [`Dispatcher`] behind a mutex, driven inline by the
//! connection threads (an event and the operations it causes cost one thread wake-up: the
//! reader's), plus a timer thread for policies that ask for the clock.
//!
//! Each queue's handle is its client's [`Outbox`]: operations are decided under the lock and
//! queued there, in decision order; the deciding thread writes them after releasing the lock,
//! without blocking (a client whose socket is full gets the rest from its own writer thread).
//! No socket I/O happens under the lock.

use crate::outbox::Outbox;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use xsched_core::{Dispatcher, Nanos, Operation};
use xsched_proto::DaemonMsg;
use xsched_sys::clock;

/// Where a queue's operations go: its client's outbox, under the client's own queue id.
#[derive(Clone)]
pub(crate) struct OpTarget {
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) queue: u32,
}

struct Inner {
    dispatcher: Dispatcher<OpTarget>,
    /// The deadline the timer thread sleeps until, if any.
    armed: Option<Nanos>,
    stopping: bool,
}

/// How many operations the daemon issued (counted here, where they are decided; read by the
/// metrics).
#[derive(Default)]
pub(crate) struct OpCounters {
    pub(crate) suspends: AtomicU64,
    pub(crate) resumes: AtomicU64,
}

/// The shared scheduler.
pub(crate) struct LockedDispatcher {
    inner: Mutex<Inner>,
    timer: Condvar,
    ops: Arc<OpCounters>,
}

/// Queue one operation on its client's outbox (no I/O), and remember the outbox for the flush
/// after the lock.
fn queue_op(ops: &OpCounters, target: &OpTarget, op: Operation, touched: &mut Vec<Arc<Outbox>>) {
    if !touched.iter().any(|o| Arc::ptr_eq(o, &target.outbox)) {
        touched.push(target.outbox.clone());
    }
    let queue = target.queue;
    target.outbox.push(&match op {
        Operation::Suspend(_) => {
            ops.suspends.fetch_add(1, Relaxed);
            DaemonMsg::Suspend { queue }
        }
        Operation::Resume(_) => {
            ops.resumes.fetch_add(1, Relaxed);
            DaemonMsg::Resume { queue }
        }
        Operation::Protect(_) => DaemonMsg::Protect {
            queue,
            protected: true,
        },
        Operation::Unprotect(_) => DaemonMsg::Protect {
            queue,
            protected: false,
        },
    });
}

/// Write what the decisions queued, after the lock.
fn flush(touched: &[Arc<Outbox>]) {
    for o in touched {
        o.flush();
    }
}

impl LockedDispatcher {
    pub(crate) fn new(dispatcher: Dispatcher<OpTarget>, ops: Arc<OpCounters>) -> LockedDispatcher {
        LockedDispatcher {
            inner: Mutex::new(Inner {
                dispatcher,
                armed: None,
                stopping: false,
            }),
            timer: Condvar::new(),
            ops,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `f` on the dispatcher, queue the operations it caused, wake the timer thread if the
    /// policy now wants the clock sooner, and write the operations once the lock is released.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Dispatcher<OpTarget>) -> R) -> R {
        let mut touched = Vec::new();
        let r = {
            let mut inner = self.lock();
            let r = f(&mut inner.dispatcher);
            inner
                .dispatcher
                .dispatch(|t, op| queue_op(&self.ops, t, op, &mut touched));
            let next = inner.dispatcher.next_timer();
            if next.is_some_and(|n| inner.armed.is_none_or(|a| n < a)) {
                self.timer.notify_one();
            }
            r
        };
        flush(&touched);
        r
    }

    /// Every queue with its decision, and the policy's name.
    pub(crate) fn snapshot(&self) -> (Vec<xsched_core::QueueSnapshot>, &'static str) {
        self.with(|d| (d.snapshot(|_, _| {}), d.policy_name()))
    }

    /// The timer thread's body: sleep until the policy's next timer, fire it, repeat; after
    /// each wake-up, `woke` (the daemon checks the thread's priority there) runs with the lock
    /// released: it may read a file, log, or change the thread's scheduling policy, and every
    /// decision on every connection thread waits for the lock. It says how long the thread may
    /// sleep at most before it wakes for it again (`None`: until the next timer).
    pub(crate) fn run_timers(&self, mut woke: impl FnMut() -> Option<Duration>) {
        loop {
            let look = woke();
            let mut inner = self.lock();
            if inner.stopping {
                let mut touched = Vec::new();
                inner
                    .dispatcher
                    .release_all(|t, op| queue_op(&self.ops, t, op, &mut touched));
                drop(inner);
                flush(&touched);
                return;
            }
            // Read afresh under the lock: a wake-up lost while it was released changes nothing.
            let next = inner.dispatcher.next_timer();
            inner.armed = next;
            let now = clock::now();
            match next {
                Some(t) if t <= now => {
                    let mut touched = Vec::new();
                    inner.dispatcher.timeout(now);
                    inner
                        .dispatcher
                        .dispatch(|t, op| queue_op(&self.ops, t, op, &mut touched));
                    drop(inner);
                    flush(&touched);
                }
                next => match next
                    .map(|t| Duration::from_nanos(t.saturating_sub(now).0))
                    .into_iter()
                    .chain(look)
                    .min()
                {
                    Some(wait) => drop(
                        self.timer
                            .wait_timeout(inner, wait)
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    ),
                    None => drop(
                        self.timer
                            .wait(inner)
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    ),
                },
            }
        }
    }

    /// Stop the timer thread (it resumes every queue on its way out).
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.timer.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn the_timer_thread_checks_its_priority_with_the_lock_released() {
        let core = Arc::new(LockedDispatcher::new(
            Dispatcher::new(xsched_core::PolicySpec::default().build()),
            Arc::new(OpCounters::default()),
        ));
        let (checks, locked) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let timers = {
            let (core, checks, locked) = (core.clone(), checks.clone(), locked.clone());
            std::thread::spawn(move || {
                let probe = core.clone();
                core.run_timers(|| {
                    if probe.inner.try_lock().is_err() {
                        locked.store(true, Ordering::SeqCst);
                    }
                    checks.fetch_add(1, Relaxed);
                    None
                });
            })
        };
        // The first check comes before the thread waits; stopping wakes it for another.
        while checks.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        core.stop();
        timers.join().expect("timer thread");
        assert!(checks.load(Relaxed) >= 2);
        assert!(
            !locked.load(Ordering::SeqCst),
            "a check ran under the core's lock"
        );
    }

    #[test]
    fn an_idle_timer_thread_wakes_to_look_at_the_machine() {
        let core = Arc::new(LockedDispatcher::new(
            Dispatcher::new(xsched_core::PolicySpec::default().build()),
            Arc::new(OpCounters::default()),
        ));
        let wakes = Arc::new(AtomicU64::new(0));
        let timers = {
            let (core, wakes) = (core.clone(), wakes.clone());
            std::thread::spawn(move || {
                core.run_timers(|| {
                    wakes.fetch_add(1, Relaxed);
                    Some(Duration::from_millis(1))
                });
            })
        };
        // No timer: only the looks wake it.
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while wakes.load(Relaxed) < 3 && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        let woke = wakes.load(Relaxed);
        core.stop();
        timers.join().expect("timer thread");
        assert!(woke >= 3, "woke {woke} times with nothing to do");
    }
}
