//! Refill on the completing thread: when the backend runs deferred completion work
//! ([`HwQueue::set_completion_hook`]), the observation of a synchronization point and the
//! launches it makes possible (the next commands up to the threshold) run on the thread that
//! completed the command, right after it reported the completion, instead of costing the
//! queue's launcher thread a wake-up.
//!
//! The work is the launcher's own (`SharedMachine::observe_and_refill`, under the queue's
//! lock, in the machine's order), so every rule of the launcher path holds: commands launch in
//! submission order and once, completions are published once, a suspended queue launches
//! nothing. What still goes to the launcher: completions somebody waits for (a waiter, or the
//! launcher watching after a cancel or while closing), and everything when the backend offers no
//! hook, refuses it, or gives it back (then anything due is passed on to the launcher, once).

use crate::clock;
use crate::completion::DeferredWork;
use crate::hwqueue::HwQueue;
use crate::machine::SharedMachine;
use crate::msg::Msg;
use crossbeam_channel::Sender;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use xsched_core::{CommandId, Nanos, QueueId};

/// The hook is not (yet) in use: the launcher refills.
const OFF: u8 = 0;
/// The backend accepted the hook and runs it.
const ON: u8 = 1;
/// The backend gave the hook back (or it failed): the launcher refills from now on.
const RELEASED: u8 = 2;

/// Where a queue's synchronization points were observed (see [`XQueue::refill_stats`]).
///
/// [`XQueue::refill_stats`]: crate::XQueue::refill_stats
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefillStats {
    /// Whether the backend runs the queue's completion hook now.
    pub completion_hook: bool,
    /// Observations (with the refill after them) made on the backend's completing thread.
    pub on_completing_thread: u64,
    /// Completions the launcher thread was woken for (synchronization points without the hook,
    /// and completions somebody waits for).
    pub launcher_wakeups: u64,
}

/// A queue's side of its completion hook, shared by its completion sinks and its launcher.
pub(crate) struct Deferral {
    state: AtomicU8,
    /// 1 + the newest synchronization point whose observation waits for the hook (0: none).
    due: AtomicU64,
    /// When the newest of them completed (ns on the runtime clock).
    at: AtomicU64,
    launcher: Sender<Msg>,
    on_hook: AtomicU64,
    on_launcher: AtomicU64,
    /// Runs of the hook in progress, and whether the queue is shutting down (see
    /// [`close`](Deferral::close)).
    running: AtomicU64,
    closed: AtomicBool,
    /// Where `close` waits for the last run in progress to end (the counter stays lock-free
    /// on the runs' path; only the last run after a close takes the lock, to wake it).
    ended: Mutex<()>,
    ended_signal: Condvar,
}

/// A run of the hook in progress (counted while it lives).
pub(crate) struct Running<'a>(&'a Deferral);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let d = self.0;
        if d.running.fetch_sub(1, Ordering::SeqCst) == 1 && d.closed.load(Ordering::SeqCst) {
            // Under the lock: `close` checks the count and starts waiting under it, so this
            // wake-up cannot fall between the two.
            let _ended = d
                .ended
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            d.ended_signal.notify_all();
        }
    }
}

impl Deferral {
    pub(crate) fn new(launcher: Sender<Msg>) -> Deferral {
        Deferral {
            state: AtomicU8::new(OFF),
            due: AtomicU64::new(0),
            at: AtomicU64::new(0),
            launcher,
            on_hook: AtomicU64::new(0),
            on_launcher: AtomicU64::new(0),
            running: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            ended: Mutex::new(()),
            ended_signal: Condvar::new(),
        }
    }

    /// Start a run of the hook, unless the queue is shutting down.
    fn enter(&self) -> Option<Running<'_>> {
        self.running.fetch_add(1, Ordering::SeqCst);
        let run = Running(self);
        (!self.closed.load(Ordering::SeqCst)).then_some(run)
    }

    /// The queue is shutting down: no run of the hook starts from now on, and this returns once
    /// those in progress ended. So the queue's last reference is never dropped on a backend's
    /// completing thread, where dropping the hardware queue would wait for that very thread (a
    /// CUDA watcher joining itself, an OpenCL queue waiting for its events inside a callback).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let mut ended = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while self.running.load(Ordering::SeqCst) != 0 {
            ended = self
                .ended_signal
                .wait(ended)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The backend accepted the hook (unless it already gave it back).
    pub(crate) fn activate(&self) {
        let _ = self
            .state
            .compare_exchange(OFF, ON, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Leave the observation of `cmd`, completed at `at`, to the hook. False when the launcher
    /// refills this queue (the caller wakes it as before).
    pub(crate) fn defer(&self, cmd: CommandId, at: Nanos) -> bool {
        if self.state.load(Ordering::SeqCst) != ON {
            return false;
        }
        self.at.fetch_max(at.0, Ordering::SeqCst);
        self.due.fetch_max(cmd.0 + 1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) != ON {
            // Given back meanwhile: pass on whatever the release did not.
            self.flush();
        }
        true
    }

    fn is_due(&self) -> bool {
        self.due.load(Ordering::SeqCst) != 0
    }

    fn take(&self) -> Option<(CommandId, Nanos)> {
        let due = self.due.swap(0, Ordering::SeqCst);
        (due > 0).then(|| (CommandId(due - 1), Nanos(self.at.load(Ordering::SeqCst))))
    }

    /// Hand whatever is due to the launcher.
    fn flush(&self) {
        if let Some((cmd, at)) = self.take() {
            let _ = self.launcher.send(Msg::Synced(cmd, at));
        }
    }

    /// Stop using the hook for good (logged once, naming `why`, if it was in use and the
    /// queue still exists), and hand what is due to the launcher.
    fn release(&self, queue: Option<QueueId>, why: &str) {
        if self.state.swap(RELEASED, Ordering::SeqCst) == ON
            && let Some(q) = queue
        {
            tracing::warn!("queue {q}: {why}; its launcher thread refills it from now on");
        }
        self.flush();
    }

    /// The launcher thread was woken for a completion.
    pub(crate) fn launcher_woken(&self) {
        self.on_launcher.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> RefillStats {
        RefillStats {
            completion_hook: self.state.load(Ordering::SeqCst) == ON,
            on_completing_thread: self.on_hook.load(Ordering::Relaxed),
            launcher_wakeups: self.on_launcher.load(Ordering::Relaxed),
        }
    }
}

/// The work behind the [`CompletionHook`](crate::CompletionHook) an XQueue hands its backend.
pub(crate) struct Refill<H: HwQueue> {
    pub(crate) deferral: Arc<Deferral>,
    /// Weak: the backend keeps the hook, and the machine keeps the backend's queue.
    pub(crate) machine: Weak<SharedMachine<H>>,
    pub(crate) queue: QueueId,
}

impl<H: HwQueue> DeferredWork for Refill<H> {
    fn due(&self) -> bool {
        self.deferral.is_due()
    }

    fn run(&self) {
        // Declared first, so it ends after the machine's reference below is dropped.
        let Some(_running) = self.deferral.enter() else {
            // Closed: nobody refills any more. Drop what is due, or a backend that runs the
            // hook while it is due (the CUDA watcher's loop) would spin on it.
            self.deferral.take();
            return;
        };
        let Some((cmd, at)) = self.deferral.take() else {
            return;
        };
        let Some(machine) = self.machine.upgrade() else {
            return;
        };
        let ran = catch_unwind(AssertUnwindSafe(|| {
            machine.try_observe_and_refill(cmd, Some(at), clock::now())
        }));
        match ran {
            Ok(true) => {
                self.deferral.on_hook.fetch_add(1, Ordering::Relaxed);
            }
            // The queue's lock is held (an application thread submitting, or a launch waiting
            // for room on the device, which this thread makes): the launcher observes it.
            Ok(false) => {
                let _ = self.deferral.launcher.send(Msg::Synced(cmd, at));
            }
            Err(_) => {
                // Observing again is harmless (an observed command is not observed twice), so the
                // launcher redoes what the failed run may have left undone.
                self.deferral.release(
                    Some(self.queue),
                    "the refill on the completing thread panicked",
                );
                let _ = self.deferral.launcher.send(Msg::Synced(cmd, at));
            }
        }
    }

    fn hand_over(&self) {
        self.deferral.flush();
    }

    fn released(&self) {
        let alive = self.machine.strong_count() > 0;
        self.deferral.release(
            alive.then_some(self.queue),
            "the backend gave back its completion hook",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::completion::{Completion, CompletionHook};
    use crate::error::HwError;
    use xsched_core::{Capabilities, DeviceId};

    /// A hardware queue for hooks whose queue is gone (their machine reference is dangling):
    /// nothing ever calls it.
    struct Gone;

    impl HwQueue for Gone {
        type Command = ();
        fn capabilities(&self) -> &Capabilities {
            unreachable!("no machine")
        }
        fn device(&self) -> DeviceId {
            unreachable!("no machine")
        }
        fn launch(&self, _: (), _: Completion) {
            unreachable!("no machine")
        }
        fn synchronize(&self) -> Result<(), HwError> {
            unreachable!("no machine")
        }
    }

    /// An active deferral and a refill over it (with no machine behind it).
    fn refill() -> (
        Arc<Deferral>,
        Refill<Gone>,
        crossbeam_channel::Receiver<Msg>,
    ) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let deferral = Arc::new(Deferral::new(tx));
        let refill = Refill {
            deferral: deferral.clone(),
            machine: Weak::new(),
            queue: QueueId(0),
        };
        (deferral, refill, rx)
    }

    #[test]
    fn a_hand_over_passes_the_newest_due_sync_point_to_the_launcher_once_and_keeps_the_hook() {
        let (deferral, refill, rx) = refill();
        assert!(!deferral.defer(CommandId(3), Nanos(10)), "not active yet");
        deferral.activate();
        let hook = CompletionHook::new(Arc::new(refill));
        assert!(deferral.defer(CommandId(3), Nanos(10)));
        assert!(deferral.defer(CommandId(7), Nanos(20)));
        assert!(hook.is_due());
        hook.hand_over();
        let sent: Vec<_> = rx.try_iter().collect();
        assert!(
            matches!(sent[..], [Msg::Synced(CommandId(7), Nanos(20))]),
            "one message, the newest"
        );
        assert!(!hook.is_due(), "nothing due any more");
        hook.hand_over();
        assert!(rx.try_iter().next().is_none(), "nothing passed on twice");
        assert!(deferral.stats().completion_hook, "the hook stays in use");
        assert!(
            deferral.defer(CommandId(8), Nanos(30)),
            "later ones still deferred"
        );
    }

    #[test]
    fn a_run_after_close_clears_what_is_due() {
        let (deferral, refill, rx) = refill();
        deferral.activate();
        assert!(deferral.defer(CommandId(5), Nanos(10)));
        deferral.close();
        // Completions reported after the close still defer (the backend keeps the hook).
        assert!(deferral.defer(CommandId(6), Nanos(20)));
        assert!(refill.due());
        refill.run();
        assert!(
            !refill.due(),
            "a backend that runs the hook while it is due would spin"
        );
        assert!(rx.try_iter().next().is_none(), "nobody refills any more");
    }

    #[test]
    fn closing_waits_for_runs_in_progress_and_starts_no_more() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let deferral = Arc::new(Deferral::new(tx));
        let run = deferral.enter().expect("open");
        let (closing, closed) = std::sync::mpsc::channel();
        let d = deferral.clone();
        let closer = std::thread::spawn(move || {
            d.close();
            closing.send(()).expect("test alive");
        });
        // A bound on waiting, not a timing claim: the run is still in progress.
        assert!(
            closed
                .recv_timeout(std::time::Duration::from_millis(50))
                .is_err(),
            "close returned while a run was in progress"
        );
        drop(run);
        closed.recv().expect("close returns once the run ended");
        closer.join().expect("closer");
        assert!(deferral.enter().is_none(), "no run starts after close");
    }
}
