//! # xsched-core
//!
//! The sans-IO heart of xsched. Nothing here reads a clock, spawns a thread or touches a
//! socket: callers pass `now` and events in and take operations out. The same code therefore
//! runs under the discrete-event simulator (virtual time), the in-process runtime (threads and
//! a monotonic clock) and the daemon (a socket loop), and a simulated result is evidence about
//! the real scheduler.
//!
//! - [`xqueue::LaunchMachine`]: progressive launching and per-level suspend/resume of one XQueue.
//! - [`scheduler::QueueScheduler`]: events in, suspend/resume operations out, timers on request.
//! - [`dispatcher::Dispatcher`]: a scheduler with each queue's driver handle, what the
//!   simulator, the in-process scheduler thread and the daemon all drive.
//! - [`policy`]: the policies, one file each, behind one registry.
//! - [`harvest`]: Hummingbird's idle-slice collector (the `slo-aware` policy's machine).
//! - [`slice`]: whether and how finely to cut a long kernel launch into preemptible slices.
//!
//! # Errors
//!
//! Every fallible public function returns [`CoreError`]; [`error::chain_text`] prints one with
//! its causes, as the CLI does. Two other error types stay, each for a contract:
//! [`level::InvalidLevel`] is `Level`'s `TryFrom<u8>::Error` (serde's `try_from` and the C API
//! convert levels with it; `Copy`, and the payload of [`CoreError::InvalidLevel`]), and the builder
//! of a policy table row (the `build` of a [`policy::PolicyEntry`]) answers a fixed `&'static str`
//! reason, which [`PolicySpec`] copies into [`CoreError::BadPolicyArgument`].

#![forbid(unsafe_code)]

pub mod capability;
pub mod command;
pub mod config;
pub mod dispatcher;
pub mod error;
pub mod harvest;
pub mod hint;
pub mod ids;
pub mod level;
pub mod policy;
pub mod scheduler;
pub mod slice;
pub mod time;
pub mod view;
pub mod xqueue;

pub use capability::Capabilities;
pub use command::CommandMeta;
pub use config::LaunchConfig;
pub use dispatcher::{Dispatcher, MIN_TIMER_GAP, QueueSnapshot};
pub use error::CoreError;
pub use hint::{Hint, MIN_TIME_SLICE, QueueHints};
pub use ids::{CommandId, DeviceId, QueueId};
pub use level::Level;
pub use policy::{Policy, PolicySpec};
pub use scheduler::{Operation, QueueEvent, QueueScheduler};
pub use time::Nanos;
pub use view::QueueView;
pub use xqueue::{HwAction, Launch, LaunchMachine, Synced};
