//! One client connection: handshake, then frames in on this thread, each handled inline on the
//! shared scheduler; answers and operations go out through the connection's outbox.
//!
//! Every refusal is an `Error` frame on the offending connection that says what was refused and
//! why; only a frame that does not decode (or a client far behind on its operations) ends the
//! connection. However the connection ends, even by a panic in its thread, its queues leave the
//! scheduler ([`Session`]'s drop) and its place in the limits is freed ([`Admitted`]'s drop).
//!
//! The handshake is here; what a connection past it handles is `session.rs`, and what it may ask
//! of other processes' queues (an operator's commands) is `operator.rs`.

mod operator;
mod session;

pub(crate) use session::Session;

use crate::admission::Admitted;
use crate::outbox::Outbox;
use crate::peer::Peer;
use crate::shared::DaemonState;
use nix::sys::socket::{MsgFlags, send};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use xsched_core::error::chain_text;
use xsched_proto::{ClientMsg, DaemonMsg, VERSION, read_frame, write_frame};

/// Serve one accepted connection until it ends.
pub(crate) fn serve(
    shared: &DaemonState,
    conn: u64,
    stream: UnixStream,
    peer: Peer,
    admitted: Admitted,
) {
    let timeout = shared.admission.limits().handshake_timeout();
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
    {
        return;
    }
    match read_frame::<ClientMsg>(&mut &stream) {
        Ok(Some(ClientMsg::Hello { version })) if version == VERSION => {}
        Ok(Some(ClientMsg::Hello { version })) => {
            tracing::info!(
                "client {} ({}) speaks protocol version {version}; refused",
                peer.pid,
                peer.name
            );
            return refuse(&stream, version_mismatch(version));
        }
        Ok(Some(other)) => {
            let why = format!("the first frame must be Hello, not {}", kind(&other));
            tracing::info!(
                "client {} ({}, uid {}): {why}; refused",
                peer.pid,
                peer.name,
                peer.uid
            );
            return refuse(&stream, why);
        }
        Ok(None) => return,
        Err(e) => {
            let e = chain_text(&e);
            // Logged like every connect and disconnect: one line per connection, bounded by
            // the connection limits, so no new way to flood the log.
            tracing::info!(
                "connection {conn}: client {} ({}, uid {}): no handshake: {e}; refused",
                peer.pid,
                peer.name,
                peer.uid
            );
            return refuse(&stream, format!("no handshake: {e}"));
        }
    }
    if write_frame(&mut &stream, &DaemonMsg::Welcome { version: VERSION }).is_err()
        || stream.set_read_timeout(None).is_err()
    {
        return;
    }
    admitted.shook_hands();
    let outbox = match Outbox::new(stream) {
        Ok(o) => Arc::new(o),
        Err(e) => {
            tracing::warn!("connection {conn}: {e}");
            return;
        }
    };
    Session::start(shared, conn, peer, outbox, admitted).read_loop();
}

/// The refusal of a client of another protocol version. The handshake frames are the same in
/// every version, so the client can read this.
pub(crate) fn version_mismatch(version: u16) -> String {
    format!(
        "protocol version {version} unsupported: this daemon speaks version {VERSION}; use the \
         xsched client library of the daemon's release"
    )
}

/// Say why, then close (the handshake failed: nothing else is expected).
fn refuse(stream: &UnixStream, message: String) {
    let _ = write_frame(
        &mut xsched_proto::client::NoSigPipe(stream),
        &DaemonMsg::Error { message },
    );
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Refuse a connection from the accept loop, which must not wait: one non-blocking send of the
/// reason (a new socket's buffer takes it), then close.
pub(crate) fn refuse_at_once(stream: &UnixStream, message: String) {
    let mut frame = Vec::new();
    if write_frame(&mut frame, &DaemonMsg::Error { message }).is_ok() {
        let _ = send(
            stream.as_raw_fd(),
            &frame,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        );
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A message's kind, for refusals (never its contents: they may be anything).
fn kind(msg: &ClientMsg) -> &'static str {
    match msg {
        ClientMsg::Hello { .. } => "Hello",
        ClientMsg::Register { .. } => "Register",
        ClientMsg::Ready { .. } => "Ready",
        ClientMsg::Idle { .. } => "Idle",
        ClientMsg::Hint { .. } => "Hint",
        ClientMsg::Unregister { .. } => "Unregister",
        ClientMsg::GetPolicy => "GetPolicy",
        ClientMsg::SetPolicy { .. } => "SetPolicy",
        ClientMsg::HintProcess { .. } => "HintProcess",
        ClientMsg::Top { .. } => "Top",
        ClientMsg::Stats { .. } => "Stats",
        ClientMsg::Ping { .. } => "Ping",
        ClientMsg::SetMode { .. } => "SetMode",
    }
}
