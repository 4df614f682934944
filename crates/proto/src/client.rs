//! The client side of the handshake, written once for every client (the runtime's agent, the
//! operator commands, the benchmarks): connect, say hello, expect the welcome.

use crate::codec::{FrameError, read_frame, write_frame};
use crate::messages::{ClientMsg, DaemonMsg, VERSION};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Why a client could not talk to the daemon.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Nobody listens at the socket (or it cannot be reached).
    #[error("no daemon at {path} ({source}); start one with `xsched serve`")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The connection failed after it was made.
    #[error("talking to the daemon: {0}")]
    Frame(#[from] FrameError),
    /// The daemon answered with an error.
    #[error("the daemon refused: {0}")]
    Refused(String),
    /// The daemon answered something else than the protocol says.
    #[error("unexpected answer from the daemon: {0}")]
    Unexpected(String),
    /// The daemon closed the connection.
    #[error("the daemon closed the connection")]
    Closed,
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Frame(FrameError::Io(e))
    }
}

/// Connect to the daemon at `path` and shake hands, waiting at most `timeout` for each step;
/// the stream keeps `timeout` as its read timeout (change it for long-lived connections).
pub fn connect(path: &Path, timeout: Duration) -> Result<UnixStream, ClientError> {
    let mut s = UnixStream::connect(path).map_err(|source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write_frame(&mut s, &ClientMsg::Hello { version: VERSION })?;
    match read_frame::<DaemonMsg>(&mut s)? {
        Some(DaemonMsg::Welcome { .. }) => Ok(s),
        Some(DaemonMsg::Error { message }) => Err(ClientError::Refused(message)),
        Some(other) => Err(ClientError::Unexpected(format!("{other:?}"))),
        None => Err(ClientError::Closed),
    }
}

/// Send `msg` and return the daemon's answer to it, skipping operations meant for this
/// client's queues (an operator connection has none, but a client's own queues may).
pub fn request(s: &mut UnixStream, msg: &ClientMsg) -> Result<DaemonMsg, ClientError> {
    write_frame(s, msg)?;
    loop {
        match read_frame::<DaemonMsg>(s)? {
            Some(
                DaemonMsg::Suspend { .. } | DaemonMsg::Resume { .. } | DaemonMsg::Protect { .. },
            ) => {}
            Some(DaemonMsg::Error { message }) => return Err(ClientError::Refused(message)),
            Some(answer) => return Ok(answer),
            None => return Err(ClientError::Closed),
        }
    }
}
