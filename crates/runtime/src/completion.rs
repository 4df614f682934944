//! How a backend reports that a command finished.
//!
//! Every launched command travels with a [`Completion`]. The backend calls
//! [`Completion::complete`] once, in the hardware queue's order, when the command is done (or
//! failed). A completion that is dropped unreported counts as [`CommandError::Lost`], so a buggy
//! backend cannot make a waiter hang. Completions of synchronization points wake the launcher,
//! or, where the backend runs the queue's [`CompletionHook`], are observed and refilled on the
//! completing thread; the others cost one atomic store.

use crate::error::CommandError;
use std::sync::Arc;
use std::time::Duration;
use xsched_core::CommandId;

/// Receives completions. The runtime implements it for XQueues; benchmarks and direct launches
/// may implement their own.
pub trait CompletionSink: Send + Sync {
    /// `cmd` finished with `result`; `sync` says whether it is a synchronization point.
    fn complete(&self, cmd: CommandId, sync: bool, result: Result<(), CommandError>);

    /// `cmd` kept the device busy for `time` (reported by backends that measure it, before
    /// the command completes; the CPU device reports its workers' time in the command's tiles,
    /// so parallel tiles add up). Backends may call it under their own locks, as they call
    /// [`complete`](Self::complete): it must not block. The default ignores it.
    fn device_time(&self, cmd: CommandId, time: Duration) {
        let _ = (cmd, time);
    }
}

/// The token a backend completes exactly once per launched command.
pub struct Completion {
    sink: Option<Arc<dyn CompletionSink>>,
    cmd: CommandId,
    sync: bool,
}

impl Completion {
    /// A token reporting to `sink`.
    pub fn new(sink: Arc<dyn CompletionSink>, cmd: CommandId, sync: bool) -> Completion {
        Completion {
            sink: Some(sink),
            cmd,
            sync,
        }
    }

    /// The command this token belongs to.
    pub fn command(&self) -> CommandId {
        self.cmd
    }

    /// Report how long the command kept the device busy, measured by the backend (call it
    /// before [`complete`](Self::complete); the queue's accounting then says its device time
    /// is measured, not estimated).
    pub fn report_device_time(&self, time: Duration) {
        if let Some(sink) = &self.sink {
            sink.device_time(self.cmd, time);
        }
    }

    /// Report the command's outcome.
    pub fn complete(mut self, result: Result<(), CommandError>) {
        if let Some(sink) = self.sink.take() {
            sink.complete(self.cmd, self.sync, result);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            sink.complete(self.cmd, self.sync, Err(CommandError::Lost));
        }
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("cmd", &self.cmd)
            .field("sync", &self.sync)
            .finish()
    }
}

/// Work a backend runs for one queue on the thread that completes its commands (see
/// [`HwQueue::set_completion_hook`](crate::HwQueue::set_completion_hook)). An XQueue hands
/// one to its backend so that, after a synchronization point completes, the observation and the
/// launches it allows (the next commands up to the threshold) run right there, instead of
/// costing the queue's launcher thread a wake-up.
///
/// The contract: while the backend keeps the hook, after reporting a completion of the queue's
/// commands it checks [`is_due`](Self::is_due) (one atomic load) and, if so, calls
/// [`run`](Self::run) on the same thread, holding none of its own locks and not from inside
/// [`HwQueue::launch`](crate::HwQueue::launch) (`run` takes the queue's lock and launches).
/// A backend that can no longer run it (shutting down) drops the hook before it reports
/// completions from elsewhere: dropping it hands the work back to the launcher thread, with
/// anything already due. A completion reported where the hook may not run this once (from
/// inside `launch`, where OpenCL calls the callback of a command that already finished)
/// is passed on with [`hand_over`](Self::hand_over).
pub struct CompletionHook {
    work: Arc<dyn DeferredWork>,
}

/// What a [`CompletionHook`] does (the runtime's refill, or a test's).
pub(crate) trait DeferredWork: Send + Sync {
    /// A completion left work for the hook.
    fn due(&self) -> bool;
    /// Do it.
    fn run(&self);
    /// Pass what is due to the launcher thread, keeping the hook.
    fn hand_over(&self);
    /// The backend dropped the hook.
    fn released(&self);
}

impl CompletionHook {
    pub(crate) fn new(work: Arc<dyn DeferredWork>) -> CompletionHook {
        CompletionHook { work }
    }

    /// Whether a completion reported since the last [`run`](Self::run) left work for it.
    pub fn is_due(&self) -> bool {
        self.work.due()
    }

    /// Do the deferred work (see the type's contract for where it may be called).
    pub fn run(&self) {
        self.work.run();
    }

    /// Leave what is due now to the queue's launcher thread (one wake-up, as without the hook),
    /// keeping the hook for later completions: for a completion reported on a thread that may
    /// not [`run`](Self::run) it at that moment.
    pub fn hand_over(&self) {
        self.work.hand_over();
    }
}

impl Drop for CompletionHook {
    fn drop(&mut self) {
        self.work.released();
    }
}

impl std::fmt::Debug for CompletionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionHook")
            .field("due", &self.is_due())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    type Entry = (u64, bool, Result<(), CommandError>);

    #[derive(Default)]
    struct Log(Mutex<Vec<Entry>>);
    impl CompletionSink for Log {
        fn complete(&self, cmd: CommandId, sync: bool, result: Result<(), CommandError>) {
            self.0.lock().expect("log").push((cmd.0, sync, result));
        }
    }

    #[test]
    fn reports_once_and_dropped_tokens_count_as_lost() {
        let log = Arc::new(Log::default());
        Completion::new(log.clone(), CommandId(0), false).complete(Ok(()));
        drop(Completion::new(log.clone(), CommandId(1), true));
        let got = log.0.lock().expect("log").clone();
        assert_eq!(
            got,
            vec![(0, false, Ok(())), (1, true, Err(CommandError::Lost))]
        );
    }
}
