//! The sending half of a client connection: a bounded queue of frames and a writer thread
//! that drains it into the socket.
//!
//! Why: the scheduler decides under one lock for every client, and what it decides for one
//! client must never wait on another client's socket. Decisions are pushed here under the lock
//! (a non-blocking push, so they keep the order in which they were taken) and written after
//! it, by this connection's own thread. A client that stops reading fills its queue; it is then
//! disconnected (its queues leave the scheduler), and nobody else waits for it.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::os::unix::net::UnixStream;
use std::time::Duration;
use xsched_proto::{DaemonMsg, write_frame};

/// Frames one client may have waiting before it counts as not reading.
const QUEUE: usize = 4096;

/// How long one write may block before the client counts as stuck.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// A connection's outgoing frames.
pub(crate) struct Outbox {
    tx: Sender<DaemonMsg>,
    /// To cut the connection off when its queue overflows.
    stream: UnixStream,
}

impl Outbox {
    /// An outbox writing to `stream`, and the writer thread's body.
    pub(crate) fn new(stream: UnixStream) -> std::io::Result<(Outbox, Writer)> {
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let writer = Writer {
            rx,
            stream: stream.try_clone()?,
        };
        Ok((Outbox { tx, stream }, writer))
    }

    /// Queue a frame without blocking. A full queue disconnects the client.
    pub(crate) fn send(&self, msg: DaemonMsg) {
        match self.tx.try_send(msg) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!("a client stopped reading its operations; disconnecting it");
                let _ = self.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// The writer thread of one connection.
pub(crate) struct Writer {
    rx: Receiver<DaemonMsg>,
    stream: UnixStream,
}

impl Writer {
    /// Write frames until every outbox handle is gone or the socket fails (which shuts the
    /// connection, so its reader cleans up).
    pub(crate) fn run(mut self) {
        for msg in &self.rx {
            if write_frame(&mut self.stream, &msg).is_err() {
                let _ = self.stream.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
}
