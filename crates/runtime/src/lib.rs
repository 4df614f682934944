//! # xsched-runtime
//!
//! Real XQueues. The core's [`LaunchMachine`](xsched_core::LaunchMachine) decides what to launch
//! and the core's [`QueueScheduler`](xsched_core::QueueScheduler) who may run; this crate gives them
//! threads, a monotonic clock (`xsched-sys`'s, shared with the daemon) and a hardware queue to
//! drive:
//!
//! - [`HwQueue`]: the small trait a backend implements (launch + synchronize for Level 1,
//!   deactivate/reactivate for Level 2, interrupt/restore for Level 3) with a capability table.
//! - [`XQueue`]: a preemptible software queue in front of one hardware queue, driven by its own
//!   launcher thread; suspend and resume act on its launch machine directly and execute the
//!   hardware actions the machine returns.
//! - [`Runtime`]: creates XQueues and, for `XSCHED_SCHEDULER=local`, runs the in-process
//!   scheduler thread that feeds the core `QueueScheduler` events and applies its operations.
//! - [`QueueOptions`] / [`RuntimeConfig`]: hints, level and launch config from the Rust API or
//!   from `XSCHED_*` environment variables.
//! - [`scheduler::SchedulerThread`]: the in-process scheduler thread over the core's
//!   `Dispatcher`; with `XSCHED_SCHEDULER=global` a client agent stands in its place and
//!   reports to the daemon.
//! - [`launch`]: the command that runs an unchanged program with its OpenCL queues under
//!   xsched (`xsched run`), the hints set by the names this crate reads.
//! - [`cache_dir`]: xsched's cache folder (`XSCHED_CACHE_DIR`, else the user's cache).
//!
//! # Errors
//!
//! Every fallible public function returns [`RuntimeError`], except where a contract needs its
//! own type, each also a payload of a `RuntimeError` variant: [`HwError`] is the [`HwQueue`]
//! trait's error, shared by every backend (`Clone`/`Eq`; [`RuntimeError::Hw`]);
//! [`CommandError`] is one command's outcome, which a backend hands to its [`Completion`] and
//! every waiter of the command receives a clone of ([`CommandHandle::wait`], [`XQueue::wait`]'s
//! inner result, [`XQueue::wait_all`], [`XQueue::close`]; [`RuntimeError::Command`]);
//! [`ParseModeError`] is [`RolloutMode`]'s `FromStr::Err`, which the CLI's argument parser uses
//! ([`RuntimeError::EnvMode`]).

#![forbid(unsafe_code)]

mod account;
mod agent;
mod cache;
mod completion;
mod env;
mod error;
mod hwqueue;
pub mod launch;
mod launcher;
mod logging;
mod machine;
mod mode;
mod msg;
mod options;
mod refill;
mod runtime;
pub mod scheduler;
mod shared;
mod sink;
mod steer;
mod xqueue;

/// The OS-facing helpers, which live in `xsched-sys` (shared with the daemon), where the
/// runtime's users and its own modules reach them.
pub use xsched_sys::{clock, fork, prompt, stamps};

pub use account::QueueAccount;
pub use cache::cache_dir;
pub use completion::{Completion, CompletionHook, CompletionSink};
/// Every `XSCHED_*` environment variable the runtime reads: what a deployment may set (the
/// Kubernetes manifests' test, `crates/cli/tests/kubernetes.rs`, checks theirs against it).
pub use env::NAMES as ENV_NAMES;
pub use error::{CommandError, HwError, RuntimeError};
pub use hwqueue::HwQueue;
pub use logging::init_logging;
pub use mode::{ParseModeError, RolloutMode};
pub use options::{DEFAULT_INFLIGHT_BUDGET, QueueOptions, RuntimeConfig, WhoSchedules};
pub use refill::RefillStats;
pub use runtime::Runtime;
pub use scheduler::Steer;
pub use xqueue::{CommandHandle, QueueState, XQueue};
/// An error with its causes, as one line (for a log or a C caller): the core's, re-exported for
/// the runtime's users that do not name the core.
pub use xsched_core::error::chain_text;
