//! # xsched-daemon
//!
//! `xsched serve`: one core [`Dispatcher`](xsched_core::Dispatcher) (the one the in-process
//! scheduler thread and the simulator drive) for every process that connects over a Unix
//! socket. Each client connection has a thread that reads its frames and handles each one
//! inline on the shared scheduler: an event costs one thread wake-up in the daemon. The
//! resulting operations are queued, in decision order, on the affected clients' outboxes and
//! written by each connection's writer thread after the scheduler's lock is released, so a
//! client that stops reading holds up nobody (it is disconnected when its queue fills). A
//! timer thread serves policies that ask for the clock. Who a client is comes from the
//! socket's peer credentials. A client that disconnects, dies, or sends a frame that does not decode loses
//! its connection and its queues at once; nobody else is affected.
//!
//! # Errors
//!
//! Every fallible public function returns [`DaemonError`]. [`InvalidConfig`] stays its own type
//! as a payload only: what a configuration's text gets wrong, the source of
//! [`DaemonError::Invalid`] (a file, with its path) and of [`DaemonError::Config`] (a text,
//! from [`DaemonConfig::parse`]), so that both carry the one verdict the checks produce.

mod accept;
mod admission;
mod authority;
mod config;
mod connection;
mod core;
mod error;
#[cfg(test)]
mod fuzz_tests;
mod metrics;
mod outbox;
mod peer;
mod registry;
mod server;
mod shared;
#[cfg(test)]
mod unseen_pid_tests;

pub use authority::Authority;
pub use config::{
    AuthorityConfig, DaemonConfig, Limits, PriorityRange, PriorityRule, SocketConfig,
};
pub use error::{DaemonError, InvalidConfig};
pub use peer::Peer;
pub use server::{Daemon, RunningDaemon};
/// What [`Daemon::bind`] runs, re-exported so that its callers need not name the core.
pub use xsched_core::PolicySpec;
