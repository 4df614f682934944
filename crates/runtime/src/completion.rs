//! How a backend reports that a command finished.
//!
//! Every launched command travels with a [`Completion`]. The backend calls
//! [`Completion::complete`] once, in the hardware queue's order, when the command is done (or
//! failed). A completion that is dropped unreported counts as [`CommandError::Lost`], so a buggy
//! backend cannot make a waiter hang. Completions of synchronization points wake the launcher;
//! the others cost one atomic store.

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
