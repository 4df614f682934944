//! Who gets a connection: the limits on connections (in all, per user, still handshaking),
//! counted from accept to the end of the connection's thread, however it ends.
//!
//! Why the handshaking ones are counted apart: a connection that never says hello would
//! otherwise hold its place until its handshake times out, and a flood of them would keep out
//! an operator's `xsched top`. When [`Limits::max_pending_handshakes`] connections are still
//! handshaking, the oldest is dropped for the newcomer: a client that says hello at once (they
//! all do) is never the oldest for long.

use crate::config::Limits;
use std::collections::{HashMap, VecDeque};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Default)]
struct Counts {
    /// Every counted connection.
    total: usize,
    /// Counted connections per user id.
    per_user: HashMap<u32, usize>,
    /// Connections still handshaking, oldest first, with a handle to drop them by.
    pending: VecDeque<(u64, UnixStream)>,
}

/// Why a connection was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionRefused {
    /// The daemon serves as many connections as it may.
    #[error("too many connections: the daemon serves at most {0} (limits.max_connections)")]
    Total(usize),
    /// The user has as many connections as one may.
    #[error(
        "too many connections from uid {uid}: at most {max} per user (limits.max_connections_per_user)"
    )]
    PerUser {
        /// The user.
        uid: u32,
        /// The limit.
        max: usize,
    },
    /// The connection's socket could not be kept.
    #[error("cannot serve: {0}")]
    CannotServe(#[source] std::io::Error),
}

/// The connection limits of one daemon.
pub(crate) struct ConnectionLimiter {
    limits: Limits,
    counts: Mutex<Counts>,
}

/// A connection counted against the limits; dropping it (the connection's thread ending, even
/// by a panic) uncounts it.
pub(crate) struct Admitted {
    admission: Arc<ConnectionLimiter>,
    conn: u64,
    uid: u32,
}

impl ConnectionLimiter {
    pub(crate) fn new(limits: Limits) -> ConnectionLimiter {
        ConnectionLimiter {
            limits,
            counts: Mutex::new(Counts::default()),
        }
    }

    /// The limits in force.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count a new connection of user `uid` (its handshake still to come), or say why not. If
    /// too many are handshaking, the oldest of them is shut down to make room.
    pub(crate) fn admit(
        self: &Arc<Self>,
        conn: u64,
        uid: u32,
        stream: &UnixStream,
    ) -> Result<Admitted, ConnectionRefused> {
        let mut c = self.counts();
        if c.total >= self.limits.max_connections {
            return Err(ConnectionRefused::Total(self.limits.max_connections));
        }
        let mine = c.per_user.get(&uid).copied().unwrap_or(0);
        if uid != 0 && mine >= self.limits.max_connections_per_user {
            return Err(ConnectionRefused::PerUser {
                uid,
                max: self.limits.max_connections_per_user,
            });
        }
        if c.pending.len() >= self.limits.max_pending_handshakes
            && let Some((old, s)) = c.pending.pop_front()
        {
            tracing::debug!("connection {old}: dropped, still silent when a newer one came");
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let handle = stream.try_clone().map_err(ConnectionRefused::CannotServe)?;
        c.pending.push_back((conn, handle));
        c.total += 1;
        *c.per_user.entry(uid).or_insert(0) += 1;
        Ok(Admitted {
            admission: self.clone(),
            conn,
            uid,
        })
    }

    /// Connections counted now (handshaking or not), and of those still handshaking.
    #[cfg(test)]
    pub(crate) fn counted(&self) -> (usize, usize) {
        let c = self.counts();
        (c.total, c.pending.len())
    }
}

impl Admitted {
    /// The handshake is over: no longer a candidate for being dropped.
    pub(crate) fn shook_hands(&self) {
        self.admission
            .counts()
            .pending
            .retain(|(c, _)| *c != self.conn);
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut c = self.admission.counts();
        c.pending.retain(|(conn, _)| *conn != self.conn);
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_user.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per_user.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_user: usize, pending: usize) -> Limits {
        Limits {
            max_connections: total,
            max_connections_per_user: per_user,
            max_pending_handshakes: pending,
            ..Limits::default()
        }
    }

    #[test]
    fn limits_refuse_with_a_reason_and_release_on_drop() {
        let a = Arc::new(ConnectionLimiter::new(limits(3, 2, 8)));
        let (s, _peer) = UnixStream::pair().expect("pair");
        let one = a.admit(1, 1000, &s).expect("first");
        let two = a.admit(2, 1000, &s).expect("second");
        let e = a
            .admit(3, 1000, &s)
            .err()
            .expect("per-user limit")
            .to_string();
        assert!(
            e.contains("uid 1000") && e.contains("max_connections_per_user"),
            "{e}"
        );
        let root = a.admit(4, 0, &s).expect("root has no per-user limit");
        let e = a.admit(5, 0, &s).err().expect("total limit").to_string();
        assert!(e.contains("limits.max_connections"), "{e}");
        drop(one);
        assert_eq!(a.counted().0, 2);
        let _three = a.admit(6, 1000, &s).expect("room again");
        drop((two, root));
        assert_eq!(a.counted().0, 1);
    }

    #[test]
    fn the_oldest_silent_connection_makes_room_for_a_new_one() {
        let a = Arc::new(ConnectionLimiter::new(limits(100, 100, 2)));
        let (first, mut first_peer) = UnixStream::pair().expect("pair");
        let (second, _p2) = UnixStream::pair().expect("pair");
        let (third, _p3) = UnixStream::pair().expect("pair");
        let _f = a.admit(1, 7, &first).expect("admit");
        let s = a.admit(2, 7, &second).expect("admit");
        s.shook_hands();
        let _t = a.admit(3, 7, &third).expect("admit");
        assert_eq!(
            a.counted(),
            (3, 2),
            "the one that shook hands is not pending"
        );
        let _u = a.admit(4, 7, &third).expect("admit");
        // Connection 1 was the oldest still handshaking: its socket is shut down.
        use std::io::Read;
        let mut buf = [0u8; 1];
        assert_eq!(
            first_peer.read(&mut buf).expect("shut down, not blocked"),
            0
        );
        assert_eq!(a.counted(), (4, 2));
    }
}
