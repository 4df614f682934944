//! Who is on the other end of a socket, from the kernel rather than from the client.

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::os::unix::net::UnixStream;

/// A connected process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: u32,
    /// User id.
    pub uid: u32,
    /// Process name (`/proc/<pid>/comm`), or `?` when unreadable.
    pub name: String,
}

impl Peer {
    /// The peer of `stream` (Linux `SO_PEERCRED`).
    pub fn of(stream: &UnixStream) -> std::io::Result<Peer> {
        let cred = getsockopt(stream, PeerCredentials).map_err(std::io::Error::from)?;
        let pid = u32::try_from(cred.pid()).unwrap_or(0);
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|_| "?".into());
        Ok(Peer {
            pid,
            uid: cred.uid(),
            name,
        })
    }

    /// Whether this peer may act on queues of `other` (same user, or root).
    pub fn may_act_on(&self, other: &Peer) -> bool {
        self.uid == 0 || self.uid == other.uid
    }
}
