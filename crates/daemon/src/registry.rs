//! Which connection owns which queue: the daemon's map from its queue ids to clients'.

use crate::peer::Peer;
use crossbeam_channel::Sender;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use xsched_core::QueueId;
use xsched_proto::DaemonMsg;
use xsched_runtime::scheduler::SchedLink;

/// One client connection.
pub(crate) struct Client {
    pub(crate) peer: Peer,
    /// Frames to the client (its writer thread).
    pub(crate) out: Sender<DaemonMsg>,
    /// The client's queue ids → the links of the daemon's queues.
    pub(crate) queues: HashMap<u32, SchedLink>,
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
    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Client>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<QueueId, (u64, u32)>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn add_client(&self, conn: u64, peer: Peer, out: Sender<DaemonMsg>) {
        self.clients().insert(
            conn,
            Client {
                peer,
                out,
                queues: HashMap::new(),
            },
        );
    }

    /// A fresh daemon-side queue id for `conn`'s queue `local`.
    pub(crate) fn new_queue(&self, conn: u64, local: u32) -> QueueId {
        let id = QueueId(self.next_queue.fetch_add(1, Ordering::Relaxed));
        self.owners().insert(id, (conn, local));
        id
    }

    pub(crate) fn add_queue(&self, conn: u64, local: u32, link: SchedLink) {
        if let Some(c) = self.clients().get_mut(&conn)
            && let Some(old) = c.queues.insert(local, link)
        {
            // Registered twice: the old registration is gone.
            self.owners().remove(&old.queue());
            old.unregister();
        }
    }

    /// Run `f` on `conn`'s queue `local`, if it exists.
    pub(crate) fn with_queue<R>(
        &self,
        conn: u64,
        local: u32,
        f: impl FnOnce(&SchedLink) -> R,
    ) -> Option<R> {
        self.clients()
            .get(&conn)
            .and_then(|c| c.queues.get(&local))
            .map(f)
    }

    pub(crate) fn remove_queue(&self, conn: u64, local: u32) -> bool {
        let link = self
            .clients()
            .get_mut(&conn)
            .and_then(|c| c.queues.remove(&local));
        match link {
            Some(link) => {
                self.owners().remove(&link.queue());
                link.unregister();
                true
            }
            None => false,
        }
    }

    /// The connection ended: every queue it had leaves the scheduler now.
    pub(crate) fn remove_client(&self, conn: u64) {
        let client = self.clients().remove(&conn);
        if let Some(c) = client {
            let mut owners = self.owners();
            for link in c.queues.into_values() {
                owners.remove(&link.queue());
                link.unregister();
            }
        }
    }

    pub(crate) fn peer(&self, conn: u64) -> Option<Peer> {
        self.clients().get(&conn).map(|c| c.peer.clone())
    }

    /// Apply `f` to every (connection, peer, client's queue id, link) of process `pid`.
    pub(crate) fn for_process(&self, pid: u32, mut f: impl FnMut(&Peer, u32, &SchedLink)) -> usize {
        let clients = self.clients();
        let mut n = 0;
        for c in clients.values().filter(|c| c.peer.pid == pid) {
            for (&local, link) in &c.queues {
                f(&c.peer, local, link);
                n += 1;
            }
        }
        n
    }

    /// Who owns the daemon's queue `id`: the peer and the client's queue id.
    pub(crate) fn owner(&self, id: QueueId) -> Option<(Peer, u32)> {
        let (conn, local) = *self.owners().get(&id)?;
        Some((self.peer(conn)?, local))
    }

    pub(crate) fn sender(&self, conn: u64) -> Option<Sender<DaemonMsg>> {
        self.clients().get(&conn).map(|c| c.out.clone())
    }
}
