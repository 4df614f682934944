//! The messages, made only of the protocol's own types. Any change to their encoding bumps
//! [`VERSION`]; the golden-bytes test (`tests/golden.rs`) fails until it does.
//!
//! The handshake is the same in every version, so that peers of different versions can always
//! tell each other why they cannot talk: [`ClientMsg::Hello`] is variant 0 of [`ClientMsg`],
//! [`DaemonMsg::Welcome`] variant 0 and [`DaemonMsg::Error`] variant 5 of [`DaemonMsg`], with
//! the same fields, forever (the golden test checks them against every older version's file).
//! New variants go at the end.

use crate::wire::{WireHint, WireHints};
use serde::{Deserialize, Serialize};

/// The protocol version; a daemon refuses clients of another version with an [`DaemonMsg::Error`]
/// saying which versions meet. 2: hints are the protocol's own types (with the SLO hint), and
/// `Stats` and `Protect` exist. 3: `Ping`/`Pong` (the agent's heartbeat), and `Top` is paged.
pub const VERSION: u16 = 3;

/// Rows in one [`DaemonMsg::Top`] page: the largest possible row (a process name is at most
/// 16 bytes) encodes in 114 bytes, so a page always fits in a frame
/// ([`MAX_FRAME`](crate::MAX_FRAME)).
pub const TOP_PAGE_ROWS: usize = 400;

/// From a client (an application's runtime, or an operator command) to the daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientMsg {
    /// First frame of every connection.
    Hello {
        /// The client's protocol version.
        version: u16,
    },
    /// A new queue of this client on a device.
    Register {
        /// The client's id for the queue.
        queue: u32,
        /// The device (queues on one device compete).
        device: u16,
        /// Hints in force from the start.
        hints: WireHints,
    },
    /// The queue has work.
    Ready {
        /// The client's queue id.
        queue: u32,
    },
    /// The queue has nothing pending and nothing in flight.
    Idle {
        /// The client's queue id.
        queue: u32,
    },
    /// New advice about one of this client's queues.
    Hint {
        /// The client's queue id.
        queue: u32,
        /// The hint.
        hint: WireHint,
    },
    /// The queue is gone.
    Unregister {
        /// The client's queue id.
        queue: u32,
    },
    /// Operator: which policy runs?
    GetPolicy,
    /// Operator: switch the policy.
    SetPolicy {
        /// A policy name (`xsched_core::policy::NAMES`).
        name: String,
    },
    /// Operator: hint a queue of another process (allowed for the same uid, or root).
    HintProcess {
        /// The process.
        pid: u32,
        /// Its queue id (as that process numbers them); `None` hints every queue of it.
        queue: Option<u32>,
        /// The hint.
        hint: WireHint,
    },
    /// Operator: one page of the queues, those with a daemon id of at least `from` (start at 0;
    /// the answer says where the next page starts).
    Top {
        /// The first daemon queue id of the page.
        from: u32,
    },
    /// Periodic statistics of one of this client's queues (for `xsched top`).
    Stats {
        /// The client's queue id.
        queue: u32,
        /// What the queue reports.
        stats: QueueStats,
    },
    /// Are you there? (The agent's heartbeat; the daemon answers [`DaemonMsg::Pong`].)
    Ping {
        /// Echoed back.
        seq: u32,
    },
}

/// What a client reports about one queue, about once a second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Commands launched, not yet observed complete.
    pub in_flight: u64,
    /// Commands completed so far.
    pub completed: u64,
    /// P99 of submit → completion of the commands completed in the last period (µs; 0 if none).
    pub recent_p99_us: f64,
}

/// From the daemon to a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DaemonMsg {
    /// The handshake succeeded.
    Welcome {
        /// The daemon's protocol version.
        version: u16,
    },
    /// Stop launching this queue (and deactivate/interrupt at its level).
    Suspend {
        /// The client's queue id.
        queue: u32,
    },
    /// Launch again.
    Resume {
        /// The client's queue id.
        queue: u32,
    },
    /// The policy running now.
    Policy {
        /// Its name.
        name: String,
    },
    /// The answer to [`ClientMsg::Top`]: one page, at most [`TOP_PAGE_ROWS`] rows.
    Top {
        /// One row per queue, in daemon-id order.
        rows: Vec<TopRow>,
        /// Where the next page starts (`from`), or `None` if this was the last.
        next: Option<u32>,
    },
    /// A request was refused (the connection stays open unless the handshake failed).
    Error {
        /// Why.
        message: String,
    },
    /// The answer to a request that has no other answer.
    Done,
    /// Lift (`protected`) or restore this queue's progressive-launching limits: others on its
    /// device are suspended for it (`xsched_core::Operation::Protect`).
    Protect {
        /// The client's queue id.
        queue: u32,
        /// Whether it is protected now.
        protected: bool,
    },
    /// The answer to [`ClientMsg::Ping`].
    Pong {
        /// The ping's `seq`.
        seq: u32,
    },
}

/// One queue as `xsched top` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopRow {
    /// The owning process (from the socket's peer credentials).
    pub pid: u32,
    /// Its name (`/proc/<pid>/comm`).
    pub process: String,
    /// The device.
    pub device: u16,
    /// The process's queue id.
    pub queue: u32,
    /// Hints in force.
    pub hints: WireHints,
    /// Whether it has work.
    pub ready: bool,
    /// Whether the scheduler has it suspended.
    pub suspended: bool,
    /// The client's latest statistics.
    pub stats: QueueStats,
}
