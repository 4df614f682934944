//! One connection to the daemon, on its own thread: connect, check who answers, shake hands,
//! then read frames: the queue operations it applies itself ([`super::controls`]), the rest it
//! passes to the agent over a bounded channel. The agent's own thread
//! never waits on any of this: a daemon that accepts but never answers (stopped, stuck) costs a
//! link thread its handshake timeout, not the agent its loop.
//!
//! Who answers is checked before anything is sent: the socket's peer must run as root, as this
//! process's user, or as `XSCHED_DAEMON_UID`. Anyone else could have put a socket where this
//! user's clients look, and obeying its `Suspend`s would hand it this program's device time.

use super::controls::{Controls, operation};
use crate::fork::Tracked;
use crate::prompt::CpuGuard;
use crate::stamps::{Stamp, stamp};
use crossbeam_channel::Sender;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use xsched_core::Operation;
use xsched_core::error::chain_text;
use xsched_proto::{DaemonMsg, ProtoError, client, read_frame};

/// Why a link ended (or never began).
#[derive(Debug)]
pub(super) enum Down {
    /// No daemon, or it went away: retry soon.
    Unreachable(String),
    /// A daemon (or something) answered and refused, or is not to be trusted: retry rarely.
    Refused(String),
}

/// One descriptor of a connection, closed by a forked child (`crate::fork`).
pub(super) struct Conn {
    _tracked: Tracked,
    pub(super) stream: UnixStream,
}

impl Conn {
    pub(super) fn new(stream: UnixStream) -> Conn {
        Conn {
            _tracked: Tracked::new(&stream),
            stream,
        }
    }
}

/// What a link thread reports to the agent, tagged with its generation.
pub(super) enum Incoming {
    /// Connected and welcomed: the agent writes on this stream.
    Up(u64, Conn),
    /// A frame from the daemon.
    Msg(u64, DaemonMsg),
    /// The link is over.
    Down(u64, Down),
}

/// Which daemon users this process obeys.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trust {
    /// This process's user.
    pub(super) own_uid: u32,
    /// `XSCHED_DAEMON_UID`, if set.
    pub(super) daemon_uid: Option<u32>,
}

impl Trust {
    fn check(&self, stream: &UnixStream, path: &Path) -> Result<(), Down> {
        let cred = getsockopt(stream, PeerCredentials)
            .map_err(|e| Down::Unreachable(format!("no peer credentials: {e}")))?;
        let uid = cred.uid();
        if uid == 0 || uid == self.own_uid || Some(uid) == self.daemon_uid {
            return Ok(());
        }
        Err(Down::Refused(format!(
            "the process answering at {} (pid {}) runs as uid {uid}, which is not root, this \
             user ({}) or XSCHED_DAEMON_UID; not obeying it",
            path.display(),
            cred.pid(),
            self.own_uid
        )))
    }
}

/// Where one link thread's frames go: operations to the queues' controls (applied here, while
/// its generation is current), everything else to the agent.
pub(super) struct Route<'a> {
    pub(super) generation: u64,
    pub(super) tx: &'a Sender<Incoming>,
    pub(super) controls: &'a Controls,
}

/// The link thread's body: report `Up`, apply the operations and pass on the other frames,
/// then report `Down` (exactly once).
pub(super) fn run(
    path: &Path,
    trust: Trust,
    handshake_timeout: Duration,
    route: &Route<'_>,
    guard: &mut CpuGuard,
) {
    let down = match connect(path, trust, handshake_timeout) {
        Ok((stream, reader)) => {
            if route
                .tx
                .send(Incoming::Up(route.generation, stream))
                .is_err()
            {
                return;
            }
            read(reader, route, guard)
        }
        Err(down) => down,
    };
    let _ = route.tx.send(Incoming::Down(route.generation, down));
}

fn connect(path: &Path, trust: Trust, timeout: Duration) -> Result<(Conn, Conn), Down> {
    let stream =
        UnixStream::connect(path).map_err(|e| Down::Unreachable(format!("connect: {e}")))?;
    let tracked = Tracked::new(&stream);
    trust.check(&stream, path)?;
    let stream = client::handshake(stream, timeout).map_err(|e| match e {
        ProtoError::Refused(why) => Down::Refused(why),
        other => Down::Unreachable(chain_text(&other)),
    })?;
    stream
        .set_read_timeout(None)
        .map_err(|e| Down::Unreachable(e.to_string()))?;
    let reader = stream
        .try_clone()
        .map_err(|e| Down::Unreachable(format!("cannot clone the socket: {e}")))?;
    let conn = Conn {
        _tracked: tracked,
        stream,
    };
    Ok((conn, Conn::new(reader)))
}

/// Apply the operations and forward the other frames until the connection ends (a link
/// superseded by a newer one stops at its next operation); a full channel makes this thread
/// (not the agent) wait, and the daemon cuts off a client that falls far behind: the agent then
/// reconnects and registers everything again.
fn read(mut conn: Conn, route: &Route<'_>, guard: &mut CpuGuard) -> Down {
    loop {
        match read_frame::<DaemonMsg>(&mut conn.stream) {
            Ok(Some(msg)) => {
                if let Some(op) = operation(&msg) {
                    if matches!(op, Operation::Suspend(_)) {
                        stamp(Stamp::SuspendReceived);
                    }
                    if !route.controls.apply_from(route.generation, op) {
                        return Down::Unreachable("superseded by a newer link".into());
                    }
                } else if route.tx.send(Incoming::Msg(route.generation, msg)).is_err() {
                    return Down::Unreachable("the agent stopped".into());
                }
                guard.check();
            }
            Ok(None) => return Down::Unreachable("the daemon closed the connection".into()),
            Err(e) => return Down::Unreachable(chain_text(&e)),
        }
    }
}
