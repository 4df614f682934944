//! Which connection owns which queue: the daemon's map from its queue ids to clients'.
//!
//! Daemon queue ids are handed out from a counter that skips ids still in use, so a daemon that
//! has seen four billion queues come and go never gives one queue another's id.

use crate::outbox::Outbox;
use crate::peer::Peer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use xsched_core::QueueId;
use xsched_proto::QueueStats;

/// Why a queue was not registered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueueRefused {
    /// The connection is not a client.
    #[error("not a client")]
    NotAClient,
    /// The connection already has as many queues as it may.
    #[error(
        "queue {local} refused: this connection already has {max} queues, the daemon's limit (limits.max_queues_per_client)"
    )]
    TooMany {
        /// The client's id for the queue.
        local: u32,
        /// The limit.
        max: usize,
    },
}

/// A broken invariant of the registry (for tests).
#[cfg(test)]
#[derive(Debug, thiserror::Error)]
pub(crate) enum Inconsistent {
    /// A queue without its owner entry.
    #[error("queue {id:?} of connection {conn} has no owner entry")]
    NoOwner {
        /// The queue.
        id: QueueId,
        /// Its connection.
        conn: u64,
    },
    /// Statistics of a queue that is not registered.
    #[error("statistics kept for unregistered queue {0}")]
    StrayStats(u32),
    /// Owner entries and queues differ in number.
    #[error("{owners} owner entries for {queues} queues")]
    Count {
        /// Owner entries.
        owners: usize,
        /// Queues.
        queues: usize,
    },
}

/// One client connection.
struct Client {
    peer: Peer,
    /// Where messages to it go (an operator's mode switch for one of its queues).
    outbox: Arc<Outbox>,
    /// The client's latest statistics per queue.
    stats: HashMap<u32, QueueStats>,
    /// The client's queue ids → the daemon's.
    queues: HashMap<u32, QueueId>,
}

/// One queue of a process, as an operator's command reaches it.
pub(crate) struct ProcessQueue {
    /// Its owner.
    pub(crate) owner: Peer,
    /// The client's id for it.
    pub(crate) local: u32,
    /// The daemon's.
    pub(crate) id: QueueId,
    /// Its client's outbox.
    pub(crate) outbox: Arc<Outbox>,
}

/// Every client and queue.
#[derive(Default)]
pub(crate) struct Registry {
    clients: Mutex<HashMap<u64, Client>>,
    /// The daemon's queue id → (connection, client's queue id).
    owners: Mutex<HashMap<QueueId, (u64, u32)>>,
    next_queue: AtomicU32,
}

impl Registry {
    fn clients(&self) -> MutexGuard<'_, HashMap<u64, Client>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn owners(&self) -> MutexGuard<'_, HashMap<QueueId, (u64, u32)>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn add_client(&self, conn: u64, peer: Peer, outbox: Arc<Outbox>) {
        self.clients().insert(
            conn,
            Client {
                peer,
                outbox,
                stats: HashMap::new(),
                queues: HashMap::new(),
            },
        );
    }

    /// A daemon queue id for `conn`'s queue `local`, and the previous one if `local` was
    /// registered before (which must be unregistered). Refused when `conn` already has `max`
    /// other queues, or is not a client.
    pub(crate) fn add_queue(
        &self,
        conn: u64,
        local: u32,
        max: usize,
    ) -> Result<(QueueId, Option<QueueId>), QueueRefused> {
        let mut clients = self.clients();
        let client = clients.get_mut(&conn).ok_or(QueueRefused::NotAClient)?;
        if !client.queues.contains_key(&local) && client.queues.len() >= max {
            return Err(QueueRefused::TooMany { local, max });
        }
        let mut owners = self.owners();
        let id = loop {
            let id = QueueId(self.next_queue.fetch_add(1, Ordering::Relaxed));
            if !owners.contains_key(&id) {
                break id;
            }
        };
        let old = client.queues.insert(local, id);
        owners.insert(id, (conn, local));
        if let Some(old) = old {
            owners.remove(&old);
            client.stats.remove(&local);
        }
        Ok((id, old))
    }

    /// The daemon's id of `conn`'s queue `local`.
    pub(crate) fn queue(&self, conn: u64, local: u32) -> Option<QueueId> {
        self.clients().get(&conn)?.queues.get(&local).copied()
    }

    pub(crate) fn remove_queue(&self, conn: u64, local: u32) -> Option<QueueId> {
        let mut clients = self.clients();
        let client = clients.get_mut(&conn)?;
        let id = client.queues.remove(&local)?;
        client.stats.remove(&local);
        self.owners().remove(&id);
        Some(id)
    }

    /// The connection ended: the daemon ids of every queue it had.
    pub(crate) fn remove_client(&self, conn: u64) -> Vec<QueueId> {
        let Some(client) = self.clients().remove(&conn) else {
            return Vec::new();
        };
        let mut owners = self.owners();
        client
            .queues
            .into_values()
            .inspect(|id| {
                owners.remove(id);
            })
            .collect()
    }

    /// Every queue of user `uid`'s clients: the client's id for it and its client's outbox.
    pub(crate) fn of_tenant(&self, uid: u32) -> Vec<(u32, Arc<Outbox>)> {
        self.clients()
            .values()
            .filter(|c| c.peer.uid == uid)
            .flat_map(|c| c.queues.keys().map(|&local| (local, c.outbox.clone())))
            .collect()
    }

    /// Every queue of process `pid`.
    pub(crate) fn of_process(&self, pid: u32) -> Vec<ProcessQueue> {
        self.clients()
            .values()
            .filter(|c| c.peer.pid == pid)
            .flat_map(|c| {
                c.queues.iter().map(|(&local, &id)| ProcessQueue {
                    owner: c.peer.clone(),
                    local,
                    id,
                    outbox: c.outbox.clone(),
                })
            })
            .collect()
    }

    /// Who owns the daemon's queue `id`: the peer, the client's queue id, and its latest
    /// statistics.
    pub(crate) fn owner(&self, id: QueueId) -> Option<(Peer, u32, QueueStats)> {
        let (conn, local) = *self.owners().get(&id)?;
        let clients = self.clients();
        let client = clients.get(&conn)?;
        let stats = client.stats.get(&local).copied().unwrap_or_default();
        Some((client.peer.clone(), local, stats))
    }

    /// How many queues are registered, and the invariant that every queue has exactly one
    /// owner and every owner entry a queue (for tests).
    #[cfg(test)]
    pub(crate) fn check(&self) -> Result<usize, Inconsistent> {
        let clients = self.clients();
        let owners = self.owners();
        let mut n = 0;
        for (&conn, c) in clients.iter() {
            for (&local, id) in &c.queues {
                n += 1;
                if owners.get(id) != Some(&(conn, local)) {
                    return Err(Inconsistent::NoOwner { id: *id, conn });
                }
            }
            if let Some(l) = c.stats.keys().find(|l| !c.queues.contains_key(l)) {
                return Err(Inconsistent::StrayStats(*l));
            }
        }
        if owners.len() != n {
            return Err(Inconsistent::Count {
                owners: owners.len(),
                queues: n,
            });
        }
        Ok(n)
    }

    /// `conn` reported statistics of its queue `local`; false if it has no such queue.
    pub(crate) fn set_stats(&self, conn: u64, local: u32, stats: QueueStats) -> bool {
        let mut clients = self.clients();
        let Some(c) = clients
            .get_mut(&conn)
            .filter(|c| c.queues.contains_key(&local))
        else {
            return false;
        };
        c.stats.insert(local, stats);
        true
    }
}
