//! # xsched-daemon
//!
//! `xsched serve`: one core [`Scheduler`](xsched_core::Scheduler) (the same scheduler thread the
//! in-process runtime uses) for every process that connects over a Unix socket. Each client
//! connection gets a reader thread (frames in) and a writer thread (operations out, so a slow
//! client never blocks the scheduler). Who a client is comes from the socket's peer
//! credentials. A client that disconnects, dies, or sends a frame that does not decode loses
//! its connection and its queues at once; nobody else is affected.

mod connection;
mod peer;
mod registry;
mod server;

pub use peer::Peer;
pub use server::{Daemon, DaemonError, RunningDaemon};
