//! What an operator reads off the daemon's [`TopRow`]s: a queue's state in words (`xsched top`)
//! and the accounting summed per process and per tenant (`xsched account`). Here, beside the
//! rows, so that every client of the daemon reads them alike.

use crate::messages::{TopRow, WireAccount, WireRolloutMode};
use std::collections::BTreeMap;
use std::fmt;

/// A queue's state, as the daemon's scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueState {
    /// It has work and is not suspended.
    Running,
    /// It has no work and is not suspended.
    Idle,
    /// The scheduler holds it.
    Suspended,
    /// The scheduler would hold it, but the queue is in observe mode, which ignores
    /// suspensions: what the policy would do, not what it did.
    WouldBeHeld,
}

impl QueueState {
    /// The state in `xsched top`'s words.
    pub fn words(self) -> &'static str {
        match self {
            QueueState::Running => "running",
            QueueState::Idle => "idle",
            QueueState::Suspended => "suspended",
            QueueState::WouldBeHeld => "would be held",
        }
    }
}

impl fmt::Display for QueueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.words())
    }
}

impl TopRow {
    /// The queue's state, from whether it is ready and suspended and its mode.
    pub fn state(&self) -> QueueState {
        let observed = self.stats.mode == Some(WireRolloutMode::Observe);
        match (self.ready, self.suspended) {
            // Observed queues ignore suspensions: what the policy would do, not did.
            (_, true) if observed => QueueState::WouldBeHeld,
            (_, true) => QueueState::Suspended,
            (true, false) => QueueState::Running,
            (false, false) => QueueState::Idle,
        }
    }
}

/// One process's queues, summed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessTotal {
    /// The process's name.
    pub name: String,
    /// Its queues.
    pub queues: usize,
    /// Their accounts merged ([`WireAccount::merge`]).
    pub account: WireAccount,
}

/// One tenant's (uid's) processes, summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantTotal {
    /// Its processes.
    pub processes: usize,
    /// Their queues.
    pub queues: usize,
    /// Their accounts merged.
    pub account: WireAccount,
}

/// Each process's total, by (uid, pid).
pub type ProcessTotals = BTreeMap<(u32, u32), ProcessTotal>;
/// Each tenant's total, by uid.
pub type TenantTotals = BTreeMap<u32, TenantTotal>;

/// The totals per process and per tenant of the queues in `rows`.
pub fn account_totals(rows: &[TopRow]) -> (ProcessTotals, TenantTotals) {
    let mut processes = ProcessTotals::new();
    for r in rows {
        let p = processes
            .entry((r.uid, r.pid))
            .or_insert_with(|| ProcessTotal {
                name: r.process.clone(),
                queues: 0,
                account: WireAccount::total(),
            });
        p.queues += 1;
        p.account.merge(&r.stats.account);
    }
    let mut tenants = TenantTotals::new();
    for (&(uid, _), p) in &processes {
        let t = tenants.entry(uid).or_insert_with(|| TenantTotal {
            processes: 0,
            queues: 0,
            account: WireAccount::total(),
        });
        t.processes += 1;
        t.queues += p.queues;
        t.account.merge(&p.account);
    }
    (processes, tenants)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::QueueStats;
    use crate::wire::WireHints;

    fn row(uid: u32, pid: u32, completed: u64) -> TopRow {
        TopRow {
            pid,
            uid,
            process: format!("p{pid}"),
            device: 0,
            queue: 0,
            hints: WireHints::default(),
            ready: false,
            suspended: false,
            stats: QueueStats {
                account: WireAccount {
                    completed,
                    device_measured: true,
                    ..WireAccount::default()
                },
                ..QueueStats::default()
            },
        }
    }

    #[test]
    fn a_queue_state_follows_ready_suspended_and_observe_mode() {
        let mut r = row(1, 1, 0);
        let mut state = |ready: bool, suspended: bool, mode: Option<WireRolloutMode>| {
            (r.ready, r.suspended, r.stats.mode) = (ready, suspended, mode);
            r.state().to_string()
        };
        assert_eq!(state(true, false, None), "running");
        assert_eq!(state(false, false, None), "idle");
        assert_eq!(state(true, true, None), "suspended");
        assert_eq!(
            state(false, true, Some(WireRolloutMode::Cooperative)),
            "suspended"
        );
        assert_eq!(
            state(true, true, Some(WireRolloutMode::Observe)),
            "would be held"
        );
        assert_eq!(
            state(true, false, Some(WireRolloutMode::Observe)),
            "running"
        );
    }

    #[test]
    fn totals_sum_queues_per_process_and_processes_per_tenant() {
        let rows = [row(1, 10, 2), row(1, 10, 3), row(1, 11, 4), row(2, 20, 5)];
        let (processes, tenants) = account_totals(&rows);
        let p10 = &processes[&(1, 10)];
        assert_eq!((p10.name.as_str(), p10.queues), ("p10", 2));
        assert_eq!(p10.account.completed, 5);
        assert_eq!(processes.len(), 3);
        let t1 = tenants[&1];
        assert_eq!((t1.processes, t1.queues, t1.account.completed), (2, 3, 9));
        assert!(t1.account.device_measured);
        let t2 = tenants[&2];
        assert_eq!((t2.processes, t2.queues, t2.account.completed), (1, 1, 5));
    }
}
