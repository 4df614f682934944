//! Typed errors of the runtime, of backends, and of single commands.

use thiserror::Error;
use xsched_core::{CoreError, Level, PolicySpec};

/// What a backend reports.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HwError {
    /// The backend does not implement this level's operation (see its capability table).
    #[error("the backend does not support level {0} operations")]
    Unsupported(Level),
    /// The backend runs no deferred completion work (`HwQueue::set_completion_hook`).
    #[error("the backend runs no deferred completion work")]
    NoCompletionHook,
    /// The device was shut down.
    #[error("the device is shut down")]
    DeviceGone,
    /// Anything the vendor runtime reported.
    #[error("backend error: {0}")]
    Backend(String),
}

/// Why one command did not complete successfully.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// The kernel or callback failed (a panic is caught and reported here).
    #[error("command failed: {0}")]
    Failed(String),
    /// The command was cancelled before it was launched.
    #[error("command was cancelled before launch")]
    Cancelled,
    /// The backend dropped the command without reporting completion.
    #[error("the backend dropped the command without completing it")]
    Lost,
}

/// Errors of runtime operations.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// Invalid configuration, hint or level (from the core's validation).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The backend refused an operation.
    #[error(transparent)]
    Hw(#[from] HwError),
    /// An `XSCHED_*` environment variable holds a value that cannot be used.
    #[error("environment variable {var}={value:?}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The policy in force (`XSCHED_POLICY`) cannot work with the queues (for example
    /// `slo-aware` without a queue that has an SLO).
    #[error("XSCHED_POLICY={policy}: {source}")]
    Policy {
        /// The policy.
        policy: PolicySpec,
        /// What the queues lack.
        source: CoreError,
    },
    /// The operation needs a running queue (e.g. changing the level of a suspended queue).
    #[error("the queue is suspended; resume it first")]
    Suspended,
    /// A command id this queue never handed out.
    #[error("command {} was never submitted to this queue", .0.0)]
    UnknownCommand(xsched_core::CommandId),
    /// The queue's launcher thread is gone (the queue was closed).
    #[error("the queue is closed")]
    Closed,
    /// A thread could not be started.
    #[error("cannot start thread: {0}")]
    Spawn(#[from] std::io::Error),
}
