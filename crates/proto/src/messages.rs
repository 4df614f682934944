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
/// 4: statistics carry the queue's accounting and mode, top rows the owner's uid, and an
/// operator can switch a queue's mode (`SetMode`). 5: the daemon bounds a tenant's queues
/// (`Bounds`), a frame a version-4 client cannot decode.
pub const VERSION: u16 = 5;

/// Rows in one [`DaemonMsg::Top`] page: the largest possible row (a process name is at most
/// 16 bytes) encodes in 262 bytes, so a page always fits in a frame
/// ([`MAX_FRAME`](crate::MAX_FRAME)).
pub const TOP_PAGE_ROWS: usize = 200;

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
        /// A policy as text (`hpf`, `kedf:2`): the daemon parses it into an
        /// `xsched_core::PolicySpec`, and refuses an unknown one naming the known ones.
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
    /// Operator: switch the rollout mode of a process's queues (allowed for the same uid, or
    /// root, as hints are).
    SetMode {
        /// The process.
        pid: u32,
        /// Its queue id (as that process numbers them); `None`: every queue of it.
        queue: Option<u32>,
        /// The mode.
        mode: WireRolloutMode,
    },
}

/// A queue's rollout mode (`xsched_runtime::RolloutMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireRolloutMode {
    /// Intercept and count; launch everything at once, never suspend.
    Observe,
    /// Level 1.
    Cooperative,
    /// The backend's highest level.
    Preemptive,
}

impl WireRolloutMode {
    /// The name `XSCHED_MODE` takes.
    pub fn name(self) -> &'static str {
        match self {
            WireRolloutMode::Observe => "observe",
            WireRolloutMode::Cooperative => "cooperative",
            WireRolloutMode::Preemptive => "preemptive",
        }
    }
}

/// What a queue's commands went through since it was created (`xsched_runtime::QueueAccount`,
/// durations in nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireAccount {
    /// Commands submitted.
    pub submitted: u64,
    /// Commands handed to the hardware.
    pub launched: u64,
    /// Commands observed complete.
    pub completed: u64,
    /// Commands cancelled before launch.
    pub cancelled: u64,
    /// Submit-to-completion time of the completed commands.
    pub latency_ns: u64,
    /// Their device time.
    pub device_ns: u64,
    /// Whether the device time was measured by the backend (else estimated).
    pub device_measured: bool,
    /// Time commands waited between submission and launch.
    pub queue_wait_ns: u64,
    /// The longest such wait.
    pub queue_wait_max_ns: u64,
    /// The most commands in flight at once.
    pub max_in_flight: u64,
    /// Completions later than the queue's SLO (or deadline) hint.
    pub latency_misses: u64,
    /// Suspensions that held work.
    pub preemptions: u64,
    /// Time held by them.
    pub held_ns: u64,
    /// What their hardware actions cost the preempting thread.
    pub preemption_cost_ns: u64,
    /// Level-3 interrupts of commands in flight.
    pub interrupts: u64,
}

impl QueueStats {
    /// The mode's name for labels and tables (`-` when none was set).
    pub fn mode_name(&self) -> &'static str {
        self.mode.map_or("-", WireRolloutMode::name)
    }
}

impl WireAccount {
    /// An empty total to [`merge`](Self::merge) accounts into: its device time counts as
    /// measured until an estimated one is merged.
    pub fn total() -> WireAccount {
        WireAccount {
            device_measured: true,
            ..WireAccount::default()
        }
    }

    /// Add `other`'s figures (a process's or a tenant's total): counts and times add, the
    /// largest wait and in-flight depth are the larger, and device time is measured only if
    /// both were.
    pub fn merge(&mut self, other: &WireAccount) {
        let sum = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        sum(&mut self.submitted, other.submitted);
        sum(&mut self.launched, other.launched);
        sum(&mut self.completed, other.completed);
        sum(&mut self.cancelled, other.cancelled);
        sum(&mut self.latency_ns, other.latency_ns);
        sum(&mut self.device_ns, other.device_ns);
        sum(&mut self.queue_wait_ns, other.queue_wait_ns);
        sum(&mut self.latency_misses, other.latency_misses);
        sum(&mut self.preemptions, other.preemptions);
        sum(&mut self.held_ns, other.held_ns);
        sum(&mut self.preemption_cost_ns, other.preemption_cost_ns);
        sum(&mut self.interrupts, other.interrupts);
        self.queue_wait_max_ns = self.queue_wait_max_ns.max(other.queue_wait_max_ns);
        self.max_in_flight = self.max_in_flight.max(other.max_in_flight);
        self.device_measured = self.device_measured && other.device_measured;
    }

    /// Time the completed commands spent other than on the device: their latency less their
    /// device time (0 where an estimated device time exceeds the latency).
    pub fn waiting_ns(&self) -> u64 {
        self.latency_ns.saturating_sub(self.device_ns)
    }
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
    /// The queue's rollout mode, if one was set (`XSCHED_MODE`, or `SetMode`).
    pub mode: Option<WireRolloutMode>,
    /// The queue's accounting.
    pub account: WireAccount,
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
    /// Switch this queue's rollout mode (an operator's [`ClientMsg::SetMode`]).
    SetMode {
        /// The client's queue id.
        queue: u32,
        /// The mode.
        mode: WireRolloutMode,
    },
    /// This queue's share of its tenant's bounds (the daemon's `[limits]`): hold at most
    /// `max_pending` commands unlaunched and `inflight_us` of device time launched but
    /// unfinished (`None`: no bound from the daemon; the queue's own still apply).
    Bounds {
        /// The client's queue id.
        queue: u32,
        /// Commands submitted but not launched.
        max_pending: Option<u32>,
        /// Device time in flight, in µs.
        inflight_us: Option<u64>,
    },
}

/// One queue as `xsched top` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopRow {
    /// The owning process (from the socket's peer credentials).
    pub pid: u32,
    /// Its user (the tenant).
    pub uid: u32,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_accounts_add_counts_and_keep_the_largest_wait_and_depth() {
        let a = WireAccount {
            completed: 3,
            device_ns: 10,
            device_measured: true,
            queue_wait_max_ns: 7,
            max_in_flight: 2,
            preemptions: u64::MAX,
            ..WireAccount::default()
        };
        let b = WireAccount {
            completed: 4,
            device_ns: 5,
            device_measured: false,
            queue_wait_max_ns: 9,
            max_in_flight: 1,
            preemptions: 1,
            ..WireAccount::default()
        };
        let mut total = WireAccount::total();
        total.merge(&a);
        total.merge(&b);
        assert_eq!((total.completed, total.device_ns), (7, 15));
        assert_eq!((total.queue_wait_max_ns, total.max_in_flight), (9, 2));
        assert!(!total.device_measured, "one estimate makes the total one");
        assert_eq!(total.preemptions, u64::MAX, "saturates");
    }

    #[test]
    fn waiting_is_latency_less_device_time_and_never_below_zero() {
        let waited = WireAccount {
            latency_ns: 30,
            device_ns: 12,
            ..WireAccount::default()
        };
        assert_eq!(waited.waiting_ns(), 18);
        let over = WireAccount {
            latency_ns: 5,
            device_ns: 9,
            ..WireAccount::default()
        };
        assert_eq!(over.waiting_ns(), 0, "an estimate above the latency");
    }
}
