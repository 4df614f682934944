//! The benchmarks' one error ([`BenchError`]): what an in-process experiment, a worker process,
//! the daemon, the soak or the daemon round trip reports when a benchmark cannot run.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;
use thiserror::Error;
use xsched_core::CoreError;
use xsched_daemon::DaemonError;
use xsched_proto::ProtoError;
use xsched_runtime::{CommandError, HwError, RuntimeError};

/// Why a benchmark (or a worker process's role) could not run. A failed check is not an error:
/// it is in the report. Each message leaves its cause to the error's source.
#[derive(Debug, Error)]
pub enum BenchError {
    /// An in-process experiment (or a worker's queue) failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The daemon a benchmark starts could not start.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// Talking to the daemon failed.
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// A process could not be started, signalled or waited for, or a socket opened.
    #[error("{what}")]
    Io {
        /// Which step.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A worker process failed.
    #[error("the {what} process failed: {status}")]
    WorkerFailed {
        /// Which worker.
        what: &'static str,
        /// How it ended.
        status: ExitStatus,
    },
    /// A worker printed something that is not its report.
    #[error("the {what} process failed")]
    WorkerReport {
        /// Which worker.
        what: &'static str,
        /// Why its output is not a report.
        source: serde_json::Error,
    },
    /// The soak's daemon did not come up.
    #[error("the daemon did not listen on {0} within 10 s")]
    NoDaemon(PathBuf),
    /// A surviving soak client printed something that is not its report.
    #[error("a client printed {text:?} (exit {status:?}), not its report")]
    ClientReport {
        /// What it printed.
        text: String,
        /// How it ended.
        status: ExitStatus,
        /// Why that is not a report.
        source: serde_json::Error,
    },
    /// The soak did not finish in time.
    #[error("the clients did not finish within {0:?}")]
    Timeout(Duration),
    /// A role name that is not one of [`Role::ALL`](crate::roles::Role::ALL)'s.
    #[error("unknown role {name:?}; expected one of {known}")]
    UnknownRole {
        /// The name given.
        name: String,
        /// Every role's name, comma-separated.
        known: String,
    },
    /// The daemon round trip's echo server hung up.
    #[error("the echo server closed the connection")]
    EchoClosed,
    /// The CPU-share benchmark needs per-thread CPU times, which only Linux gives.
    #[error("per-thread CPU time needs Linux /proc/self/task/*/schedstat")]
    NoThreadCpuTime,
    /// A benchmark that starts worker processes was given no binary to start them from.
    #[error("this benchmark starts worker processes and was given no xsched binary")]
    NoExe,
}

/// The runtime's own sources, taken up with `?` in an in-process experiment, are the runtime's
/// errors ([`BenchError::Runtime`]), as they were before the experiment had an error of its own:
/// an invalid hint or config (the core's), a backend's, a command's, a device's threads that
/// could not start.
macro_rules! through_the_runtime {
    ($($source:ty),*) => {$(
        impl From<$source> for BenchError {
            fn from(e: $source) -> BenchError {
                BenchError::Runtime(RuntimeError::from(e))
            }
        }
    )*};
}

through_the_runtime!(CoreError, HwError, CommandError, std::io::Error);

/// [`BenchError::Io`] for the step `what`, as a `map_err` argument.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}
