//! The client side of the protocol, written once for every client (the runtime's agent, the
//! operator commands, the benchmarks): connect, say hello, expect the welcome; requests; the
//! paged `Top`. Every write goes through [`NoSigPipe`]: a client runs inside somebody else's
//! program, and a daemon that went away must cost it an error, never a SIGPIPE.

use crate::codec::{ProtoError, read_frame, write_frame};
use crate::messages::{ClientMsg, DaemonMsg, TopRow, VERSION};
use nix::sys::socket::{MsgFlags, send};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Read the daemon's next frame; a read that timed out is [`ProtoError::NoAnswer`].
fn answer(s: &mut UnixStream) -> Result<Option<DaemonMsg>, ProtoError> {
    read_frame::<DaemonMsg>(s).map_err(|e| match e {
        ProtoError::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            ProtoError::NoAnswer(s.read_timeout().ok().flatten().unwrap_or_default())
        }
        other => other,
    })
}

/// Writes to a socket with `MSG_NOSIGNAL`: a peer that is gone gives `EPIPE`, whatever the host
/// program does with SIGPIPE (std's own socket writes leave that to the toolchain). Honours the
/// socket's write timeout.
pub struct NoSigPipe<'a>(pub &'a UnixStream);

impl Write for NoSigPipe<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        loop {
            match send(self.0.as_raw_fd(), buf, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => {}
                // A timed-out blocking send reports EAGAIN; std calls that `WouldBlock`.
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Write one frame to `s` without any risk of SIGPIPE.
pub fn send_frame(s: &UnixStream, msg: &ClientMsg) -> Result<(), ProtoError> {
    write_frame(&mut NoSigPipe(s), msg)
}

/// Connect to the daemon at `path` and shake hands, waiting at most `timeout` for each step;
/// the stream keeps `timeout` as its read and write timeouts (change them for long-lived
/// connections).
pub fn connect(path: &Path, timeout: Duration) -> Result<UnixStream, ProtoError> {
    let s = UnixStream::connect(path).map_err(|source| ProtoError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    handshake(s, timeout)
}

/// Shake hands on a connected stream (for a client that checks who it connected to first).
pub fn handshake(mut s: UnixStream, timeout: Duration) -> Result<UnixStream, ProtoError> {
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    // A daemon that refuses at once may close before the hello arrives: its reason is still
    // there to read, so read before reporting a failed write.
    let sent = send_frame(&s, &ClientMsg::Hello { version: VERSION });
    let answer = match (sent, answer(&mut s)) {
        (Err(e), Err(_) | Ok(None)) => return Err(e),
        (_, a) => a?,
    };
    match answer {
        Some(DaemonMsg::Welcome { .. }) => Ok(s),
        Some(DaemonMsg::Error { message }) => Err(ProtoError::Refused(message)),
        Some(other) => Err(ProtoError::Unexpected(format!("{other:?}"))),
        None => Err(ProtoError::Closed),
    }
}

/// Send `msg` and return the daemon's answer to it, skipping operations meant for this
/// client's queues (an operator connection has none, but a client's own queues may).
pub fn request(s: &mut UnixStream, msg: &ClientMsg) -> Result<DaemonMsg, ProtoError> {
    send_frame(s, msg)?;
    loop {
        match answer(s)? {
            Some(
                DaemonMsg::Suspend { .. }
                | DaemonMsg::Resume { .. }
                | DaemonMsg::Protect { .. }
                | DaemonMsg::SetMode { .. }
                | DaemonMsg::Bounds { .. }
                | DaemonMsg::Pong { .. },
            ) => {}
            Some(DaemonMsg::Error { message }) => return Err(ProtoError::Refused(message)),
            Some(answer) => return Ok(answer),
            None => return Err(ProtoError::Closed),
        }
    }
}

/// Every queue the daemon shows this client (all of them to an operator with the authority to
/// see everyone's; otherwise this user's), fetched page by page.
pub fn top(s: &mut UnixStream) -> Result<Vec<TopRow>, ProtoError> {
    let mut rows = Vec::new();
    let mut from = 0;
    loop {
        match request(s, &ClientMsg::Top { from })? {
            DaemonMsg::Top { rows: page, next } => {
                rows.extend(page);
                match next {
                    Some(n) if n > from => from = n,
                    Some(n) => {
                        return Err(ProtoError::Unexpected(format!(
                            "a Top page from {from} said the next starts at {n}"
                        )));
                    }
                    None => return Ok(rows),
                }
            }
            other => return Err(ProtoError::Unexpected(format!("{other:?}"))),
        }
    }
}
