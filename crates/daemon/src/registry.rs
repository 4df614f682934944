//! Which connection owns which queue: the daemon's map from its queue ids to clients'.

use crate::peer::Peer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use xsched_core::QueueId;
use xsched_proto::QueueStats;

/// One client connection.
struct Client {
    peer: Peer,
    /// The client's latest statistics per queue.
    stats: HashMap<u32, QueueStats>,
    /// The client's queue ids → the daemon's.
    queues: HashMap<u32, QueueId>,
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

    pub(crate) fn add_client(&self, conn: u64, peer: Peer) {
        self.clients().insert(
            conn,
            Client {
                peer,
                stats: HashMap::new(),
                queues: HashMap::new(),
            },
        );
    }

    /// A daemon queue id for `conn`'s queue `local`, and the previous one if it was registered
    /// before (which must be unregistered).
    pub(crate) fn add_queue(&self, conn: u64, local: u32) -> (QueueId, Option<QueueId>) {
        let id = QueueId(self.next_queue.fetch_add(1, Ordering::Relaxed));
        let old = self
            .clients()
            .get_mut(&conn)
            .and_then(|c| c.queues.insert(local, id));
        let mut owners = self.owners();
        owners.insert(id, (conn, local));
        if let Some(old) = old {
            owners.remove(&old);
        }
        (id, old)
    }

    /// The daemon's id of `conn`'s queue `local`.
    pub(crate) fn queue(&self, conn: u64, local: u32) -> Option<QueueId> {
        self.clients().get(&conn)?.queues.get(&local).copied()
    }

    pub(crate) fn remove_queue(&self, conn: u64, local: u32) -> Option<QueueId> {
        let id = self.clients().get_mut(&conn)?.queues.remove(&local)?;
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

    /// Every (owner, client's queue id, daemon queue id) of process `pid`.
    pub(crate) fn of_process(&self, pid: u32) -> Vec<(Peer, u32, QueueId)> {
        self.clients()
            .values()
            .filter(|c| c.peer.pid == pid)
            .flat_map(|c| c.queues.iter().map(|(&l, &id)| (c.peer.clone(), l, id)))
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
