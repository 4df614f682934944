//! # xsched-daemon
//!
//! `xsched serve`: one core [`Scheduler`](xsched_core::Scheduler) (in the same
//! [`Dispatcher`](xsched_runtime::scheduler::Dispatcher) the in-process scheduler thread runs)
//! for every process that connects over a Unix socket. Each client connection has a thread
//! that reads its frames and handles each one inline on the shared scheduler, writing the
//! resulting operations straight to the affected clients' sockets (with a write timeout, so a
//! stuck client cannot hold the daemon): an event costs one thread wake-up in the daemon. A
//! timer thread serves policies that ask for the clock. Who a client is comes from the
//! socket's peer credentials. A client that disconnects, dies, or sends a frame that does not decode loses
//! its connection and its queues at once; nobody else is affected.

mod connection;
mod core;
mod metrics;
mod peer;
mod registry;
mod server;

pub use peer::Peer;
pub use server::{Daemon, DaemonError, RunningDaemon};
