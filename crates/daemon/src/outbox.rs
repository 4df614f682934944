//! The sending half of a client connection: frames queued in decision order, written by
//! whoever decided them once the scheduler's lock is released, without ever blocking on the
//! client; what the socket does not take at once is left to this connection's writer thread.
//!
//! Why: the scheduler decides under one lock for every client, and what it decides for one
//! client must never wait on another client's socket. Decisions are queued here under the lock
//! (an append to a byte buffer, so they keep the order in which they were taken) and flushed
//! after it with a non-blocking send: the usual case costs one system call and no thread
//! wake-up. A client whose socket buffer is full gets the rest from its writer thread (started
//! the first time it is needed), which may block (up to a write timeout); a client that lets its
//! queue grow past [`LIMIT`] has stopped reading and is disconnected (its queues then leave the
//! scheduler). Nobody else waits for it.
//!
//! The outbox owns the connection's only descriptor; the connection's reader reads through
//! [`Outbox::stream`].

use nix::sys::socket::{MsgFlags, send};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use xsched_proto::client::NoSigPipe;
use xsched_proto::{DaemonMsg, write_frame};

/// Bytes one client may have waiting before it counts as not reading.
const LIMIT: usize = 1 << 20;

/// How long one blocking write (the writer thread's) may take before the client counts as stuck.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Pending {
    /// Encoded frames not yet written, in order.
    bytes: Vec<u8>,
    /// The writer thread owns the socket's write side now (it holds bytes taken from here).
    writer_busy: bool,
    /// The writer thread exists.
    writer_started: bool,
    /// The connection is over: drop everything.
    closed: bool,
}

/// A connection's outgoing frames.
pub(crate) struct Outbox {
    pending: Mutex<Pending>,
    wake: Condvar,
    stream: UnixStream,
}

impl Outbox {
    /// An outbox writing to `stream`.
    pub(crate) fn new(stream: UnixStream) -> std::io::Result<Outbox> {
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        Ok(Outbox {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            stream,
        })
    }

    /// The connection's socket (for reading; writes go through the outbox).
    pub(crate) fn stream(&self) -> &UnixStream {
        &self.stream
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn disconnect(&self, p: &mut Pending) {
        p.closed = true;
        p.bytes.clear();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        self.wake.notify_all();
    }

    /// Queue a frame (in decision order; no I/O). A client far behind is disconnected.
    pub(crate) fn push(&self, msg: &DaemonMsg) {
        let mut p = self.lock();
        if p.closed {
            return;
        }
        if write_frame(&mut p.bytes, msg).is_err() || p.bytes.len() > LIMIT {
            tracing::warn!("a client stopped reading its operations; disconnecting it");
            self.disconnect(&mut p);
        }
    }

    /// Write what is queued without blocking; leave the rest to the writer thread.
    pub(crate) fn flush(self: &Arc<Self>) {
        let mut p = self.lock();
        if p.writer_busy || p.closed || p.bytes.is_empty() {
            return;
        }
        match send(
            self.stream.as_raw_fd(),
            &p.bytes,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        ) {
            Ok(n) => {
                p.bytes.drain(..n);
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            Err(_) => return self.disconnect(&mut p),
        }
        if !p.bytes.is_empty() {
            if !p.writer_started {
                let writer = self.clone();
                let spawned = std::thread::Builder::new()
                    .name("xsched-out".into())
                    .spawn(move || writer.run_writer());
                if spawned.is_err() {
                    tracing::warn!("cannot start a writer thread; disconnecting a slow client");
                    return self.disconnect(&mut p);
                }
                p.writer_started = true;
            }
            p.writer_busy = true;
            self.wake.notify_all();
        }
    }

    /// Queue a frame and write it.
    pub(crate) fn send(self: &Arc<Self>, msg: &DaemonMsg) {
        self.push(msg);
        self.flush();
    }

    /// The connection ended: stop the writer thread.
    pub(crate) fn close(&self) {
        let mut p = self.lock();
        p.closed = true;
        self.wake.notify_all();
    }

    /// The writer thread's body: whenever a flush left bytes behind, write them with blocking
    /// writes (each bounded by the write timeout; a failure shuts the connection, so its reader
    /// cleans up); return when the connection closes.
    fn run_writer(&self) {
        use std::io::Write;
        let mut p = self.lock();
        loop {
            while !p.closed && !p.writer_busy {
                p = self.wake.wait(p).unwrap_or_else(PoisonError::into_inner);
            }
            if p.closed {
                return;
            }
            let chunk = std::mem::take(&mut p.bytes);
            drop(p);
            let written = NoSigPipe(&self.stream).write_all(&chunk);
            p = self.lock();
            if written.is_err() {
                self.disconnect(&mut p);
                return;
            }
            if p.bytes.is_empty() {
                p.writer_busy = false;
            }
        }
    }
}
