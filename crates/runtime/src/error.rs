//! Typed errors of the runtime ([`RuntimeError`], what its public functions return), and the
//! two contract errors it carries: a backend's ([`HwError`], the [`HwQueue`](crate::HwQueue)
//! trait's) and a single command's ([`CommandError`], what a completion carries to its waiters).

use crate::mode::ParseModeError;
use std::path::PathBuf;
use thiserror::Error;
use xsched_core::{CoreError, Level, PolicySpec};

/// The OpenCL shim's file name ([`crate::launch`] looks for it; its errors name it).
pub(crate) const SHIM: &str = "libxsched_opencl.so";
/// The variable that names the shim's file.
pub(crate) const SHIM_VAR: &str = "XSCHED_OPENCL_SHIM";

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

/// Errors of runtime operations, of reading the `XSCHED_*` environment, and of preparing a
/// program's launch under the OpenCL shim ([`crate::launch`]).
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// Invalid configuration, hint or level (from the core's validation).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The backend refused an operation.
    #[error(transparent)]
    Hw(#[from] HwError),
    /// A command did not complete successfully (what [`CommandHandle::wait`] and
    /// [`XQueue::wait_all`](crate::XQueue::wait_all) report, taken up with `?`).
    ///
    /// [`CommandHandle::wait`]: crate::CommandHandle::wait
    #[error(transparent)]
    Command(#[from] CommandError),
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
    /// An `XSCHED_*` environment variable holds a value the core refuses (a level, a policy).
    #[error("environment variable {var}={value:?}")]
    EnvRefused {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What the core said.
        #[source]
        source: CoreError,
    },
    /// `XSCHED_MODE` names no rollout mode.
    #[error("environment variable XSCHED_MODE={value:?}")]
    EnvMode {
        /// Its value.
        value: String,
        /// What it must be.
        #[source]
        source: ParseModeError,
    },
    /// The policy in force (`XSCHED_POLICY`) cannot work with the queues (for example
    /// `slo-aware` without a queue that has an SLO).
    #[error("XSCHED_POLICY={policy}")]
    Policy {
        /// The policy.
        policy: PolicySpec,
        /// What the queues lack.
        #[source]
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
    #[error("cannot start thread")]
    Spawn(#[from] std::io::Error),
    /// No program was named to launch.
    #[error("no command given: xsched run [OPTIONS] -- CMD [ARGS...]")]
    NoCommand,
    /// `XSCHED_OPENCL_SHIM` names no file.
    #[error("{SHIM_VAR}={}: no such file", .path.display())]
    NoShimFile {
        /// What it names.
        path: PathBuf,
    },
    /// The running binary could not be located (the shim is looked for beside it).
    #[error("locating the xsched binary")]
    Exe(#[source] std::io::Error),
    /// The running binary's path has no folder.
    #[error("the xsched binary has no folder")]
    NoExeFolder,
    /// The shim is in none of the places looked in.
    #[error(
        "the OpenCL shim ({SHIM}) is not in {list}: build it (cargo build --release -p \
         xsched-shim-opencl) or name it in {SHIM_VAR}",
        list = or_list(.places)
    )]
    NoShim {
        /// Where it was looked for.
        places: Vec<PathBuf>,
    },
    /// A path the dynamic linker would split in two (at a space or a colon).
    #[error(
        "{}: the dynamic linker splits paths at spaces and colons; put the shim (or \
         XDG_CACHE_HOME) where the path has neither and name it in {SHIM_VAR}",
        .path.display()
    )]
    Splittable {
        /// The path.
        path: PathBuf,
    },
    /// The shim's real path could not be resolved.
    #[error("resolving {}", .path.display())]
    Resolve {
        /// The shim as found.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The stand-in folder could not be created.
    #[error("creating {}", .path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A loader's name could not be linked to the shim.
    #[error("linking {} to {}", .at.display(), .target.display())]
    Link {
        /// The link.
        at: PathBuf,
        /// The shim.
        target: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The paths, joined with " or ".
fn or_list(places: &[PathBuf]) -> String {
    places
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" or ")
}
