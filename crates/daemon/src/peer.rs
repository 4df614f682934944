//! Who is on the other end of a socket, from the kernel rather than from the client.

use crate::error::DaemonError;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::os::unix::net::UnixStream;

/// The longest process name kept (the kernel's `comm` is at most 15 bytes; anything longer did
/// not come from it).
const MAX_NAME: usize = 16;

/// A connected process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: u32,
    /// User id.
    pub uid: u32,
    /// Its primary and supplementary group ids (for `@group` rules).
    pub gids: Vec<u32>,
    /// Process name (`/proc/<pid>/comm`), or `?` when unreadable.
    pub name: String,
}

impl Peer {
    /// The peer of `stream` (Linux `SO_PEERCRED`; groups from `/proc/<pid>/status`).
    pub fn of(stream: &UnixStream) -> Result<Peer, DaemonError> {
        let cred = getsockopt(stream, PeerCredentials)
            .map_err(|e| DaemonError::PeerCredentials(e.into()))?;
        let pid = u32::try_from(cred.pid()).unwrap_or(0);
        let mut name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|_| "?".into());
        if name.len() > MAX_NAME {
            let cut = (0..=MAX_NAME)
                .rev()
                .find(|&i| name.is_char_boundary(i))
                .unwrap_or(0);
            name.truncate(cut);
        }
        let mut gids = vec![cred.gid()];
        gids.extend(
            supplementary_groups(pid)
                .into_iter()
                .filter(|&g| g != cred.gid()),
        );
        Ok(Peer {
            pid,
            uid: cred.uid(),
            gids,
            name,
        })
    }
}

/// The `Groups:` line of `/proc/<pid>/status` (empty if unreadable).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Groups:"))
                .map(|groups| {
                    groups
                        .split_whitespace()
                        .filter_map(|g| g.parse().ok())
                        .collect()
                })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_who_the_kernel_says() {
        let (a, _b) = UnixStream::pair().expect("pair");
        let me = Peer::of(&a).expect("credentials");
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.uid, nix::unistd::getuid().as_raw());
        assert_eq!(me.gids[0], nix::unistd::getgid().as_raw());
        assert!(me.name.len() <= MAX_NAME && !me.name.is_empty());
    }
}
