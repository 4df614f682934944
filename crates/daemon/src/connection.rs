//! One client connection: handshake, then frames in on this thread, each handled inline on the
//! shared scheduler; answers and operations go out through the connection's outbox.
//!
//! Every refusal is an `Error` frame on the offending connection that says what was refused and
//! why; only a frame that does not decode (or a client far behind on its operations) ends the
//! connection. However the connection ends, even by a panic in its thread, its queues leave the
//! scheduler ([`Session`]'s drop) and its place in the limits is freed ([`Admitted`]'s drop).

use crate::admission::Admitted;
use crate::config::PriorityRefused;
use crate::core::Target;
use crate::outbox::Outbox;
use crate::peer::Peer;
use crate::registry::ProcessQueue;
use crate::shared::DaemonState;
use nix::sys::socket::{MsgFlags, send};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use xsched_core::{DeviceId, Event, Hint, PolicySpec, QueueId};
use xsched_proto::{
    ClientMsg, DaemonMsg, FrameError, TOP_PAGE_ROWS, TopRow, VERSION, WireHint, WireHints,
    WireMode, read_frame, write_frame,
};
use xsched_sys::clock;
use xsched_sys::prompt::CpuGuard;
use xsched_sys::stamps;

/// The pid `SO_PEERCRED` gives for a peer in a PID namespace the daemon's cannot see (a
/// container's, when the daemon has a namespace of its own): shared by every such peer, so it
/// names none of them.
const UNSEEN_PID: u32 = 0;

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

/// A connection past its handshake.
pub(crate) struct Session<'a> {
    shared: &'a DaemonState,
    conn: u64,
    peer: Peer,
    outbox: Arc<Outbox>,
    _admitted: Admitted,
    /// A refused `Register` was logged already (once per connection: a client may retry).
    said_refused: std::cell::Cell<bool>,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.outbox.close();
        let queues = self.shared.registry.remove_client(self.conn);
        self.rebalance();
        let now = clock::now();
        self.shared.core.with(|d| {
            for q in queues {
                let _ = d.event(now, Event::Unregister(q));
            }
        });
        tracing::info!(
            "client {} ({}) gone; its queues released",
            self.peer.pid,
            self.peer.name
        );
    }
}

fn error(message: String) -> Option<DaemonMsg> {
    Some(DaemonMsg::Error { message })
}

impl<'a> Session<'a> {
    /// The client `peer` on connection `conn` is in.
    pub(crate) fn start(
        shared: &'a DaemonState,
        conn: u64,
        peer: Peer,
        outbox: Arc<Outbox>,
        admitted: Admitted,
    ) -> Session<'a> {
        shared
            .registry
            .add_client(conn, peer.clone(), outbox.clone());
        tracing::info!("client {} ({}) connected", peer.pid, peer.name);
        if peer.pid == UNSEEN_PID {
            tracing::warn!(
                "client of uid {} connected from a PID namespace this daemon cannot see \
                 (SO_PEERCRED pid 0): it is scheduled as any other, but `xsched top` shows it as \
                 pid 0, `hint --pid`/`mode set --pid` cannot name it, and @group rules see only \
                 its primary group; run the daemon in the host's PID namespace (hostPID)",
                peer.uid
            );
        }
        Session {
            shared,
            conn,
            peer,
            outbox,
            _admitted: admitted,
            said_refused: std::cell::Cell::new(false),
        }
    }

    /// Log a refusal on this connection, the first time only.
    fn log_refusal(&self, why: &str) {
        if !self.said_refused.replace(true) {
            tracing::warn!(
                "client {} ({}, uid {}): {why} (further refusals on this connection not logged)",
                self.peer.pid,
                self.peer.name,
                self.peer.uid
            );
        }
    }

    fn read_loop(&self) {
        // Decisions are taken on this thread; a client that keeps it busy loses its priority.
        let mut guard = CpuGuard::start();
        loop {
            match read_frame::<ClientMsg>(&mut self.outbox.stream()) {
                Ok(Some(msg)) => {
                    if let Some(answer) = self.handle(msg) {
                        self.outbox.send(&answer);
                    }
                    guard.check();
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(
                        "client {} ({}): {e}; closing its connection",
                        self.peer.pid,
                        self.peer.name
                    );
                    if matches!(e, FrameError::Malformed(_) | FrameError::TooLarge(_)) {
                        self.outbox.send(&DaemonMsg::Error {
                            message: format!("{e}; closing the connection"),
                        });
                    }
                    return;
                }
            }
        }
    }

    /// A priority this peer may not use, refused with the reason.
    fn check_hint(&self, hint: WireHint) -> Result<(), PriorityRefused> {
        match hint {
            WireHint::Priority(p) => self.shared.authority.check_priority(&self.peer, p),
            _ => Ok(()),
        }
    }

    /// Run an event on one of this connection's queues.
    fn on_queue(&self, local: u32, make: impl FnOnce(QueueId) -> Event) -> Option<DaemonMsg> {
        let Some(q) = self.shared.registry.queue(self.conn, local) else {
            return error(format!("unknown queue {local}"));
        };
        let now = clock::now();
        let result = self.shared.core.with(|d| d.event(now, make(q)));
        result
            .err()
            .and_then(|e| error(format!("queue {local}: {e}")))
    }

    /// Handle one message; the answer to send back, if any.
    pub(crate) fn handle(&self, msg: ClientMsg) -> Option<DaemonMsg> {
        let (shared, reg) = (self.shared, &self.shared.registry);
        match msg {
            ClientMsg::Hello { .. } => error("already said hello".into()),
            ClientMsg::Register {
                queue,
                device,
                hints,
            } => self.register(queue, device, hints),
            ClientMsg::Ready { queue } => {
                let answer = self.on_queue(queue, Event::Ready);
                stamps::stamp(stamps::Stamp::Decided);
                answer
            }
            ClientMsg::Idle { queue } => self.on_queue(queue, Event::Idle),
            ClientMsg::Hint { queue, hint } => match self.check_hint(hint) {
                Ok(()) => self.on_queue(queue, |q| Event::Hint {
                    queue: q,
                    hint: hint.into(),
                }),
                Err(why) => error(format!("hint on queue {queue} refused: {why}")),
            },
            ClientMsg::Unregister { queue } => self.unregister(queue),
            ClientMsg::GetPolicy => Some(DaemonMsg::Policy {
                name: shared.core.with(|d| d.policy_name()).to_string(),
            }),
            ClientMsg::SetPolicy { name } => self.set_policy(&name),
            ClientMsg::HintProcess { pid, queue, hint } => self.hint_process(pid, queue, hint),
            ClientMsg::Stats { queue, stats } => {
                if reg.set_stats(self.conn, queue, stats) {
                    None
                } else {
                    error(format!("unknown queue {queue}"))
                }
            }
            ClientMsg::Top { from } => Some(self.top_page(from)),
            ClientMsg::Ping { seq } => Some(DaemonMsg::Pong { seq }),
            ClientMsg::SetMode { pid, queue, mode } => self.set_mode(pid, queue, mode),
        }
    }

    /// `Register`: queue `queue` on `device` with `hints`, if this peer may use them (the queue
    /// it replaces, if any, leaves first); the refusal otherwise.
    fn register(&self, queue: u32, device: u16, hints: WireHints) -> Option<DaemonMsg> {
        let (shared, reg) = (self.shared, &self.shared.registry);
        let refused = |why: String| {
            let why = format!("queue {queue} not registered: {why}");
            self.log_refusal(&why);
            error(why)
        };
        let hints = match hints.to_core() {
            Ok(h) => h,
            Err(e) => return refused(e.to_string()),
        };
        if let Err(why) = shared.authority.check_priority(&self.peer, hints.priority) {
            return refused(why.to_string());
        }
        let max = shared.admission.limits().max_queues_per_client;
        let (id, old) = match reg.add_queue(self.conn, queue, max) {
            Ok(ids) => ids,
            Err(why) => {
                let why = why.to_string();
                self.log_refusal(&why);
                return error(why);
            }
        };
        let target = Target {
            outbox: self.outbox.clone(),
            queue,
        };
        let now = clock::now();
        let result = shared.core.with(|d| {
            if let Some(old) = old {
                let _ = d.event(now, Event::Unregister(old));
            }
            d.register(now, id, DeviceId(device), hints, target)
        });
        match result {
            Ok(()) => {
                self.rebalance();
                None
            }
            Err(e) => {
                reg.remove_queue(self.conn, queue);
                refused(e.to_string())
            }
        }
    }

    /// `Unregister`: this connection's queue `queue` leaves the scheduler.
    fn unregister(&self, queue: u32) -> Option<DaemonMsg> {
        let (shared, reg) = (self.shared, &self.shared.registry);
        match reg.remove_queue(self.conn, queue) {
            Some(q) => {
                let now = clock::now();
                let result = shared.core.with(|d| d.event(now, Event::Unregister(q)));
                self.rebalance();
                result.err().and_then(|e| error(e.to_string()))
            }
            None => error(format!("unknown queue {queue}")),
        }
    }

    /// `SetPolicy`: every queue switches to policy `name`, if this peer may set it.
    fn set_policy(&self, name: &str) -> Option<DaemonMsg> {
        let shared = self.shared;
        if !shared.authority.may_set_policy(&self.peer) {
            tracing::warn!(
                "uid {} (pid {}) may not set the policy; refused `{}`",
                self.peer.uid,
                self.peer.pid,
                name.escape_debug()
            );
            return error(format!(
                "setting the policy refused: uid {} is not root, the daemon's user, or \
                 named in authority.set_policy",
                self.peer.uid
            ));
        }
        // The wire carries text: it is parsed here, where it enters, with the same error (naming
        // the known policies) as every other entry.
        let result = name.parse::<PolicySpec>().and_then(|spec| {
            shared.core.with(|d| d.set_policy(spec.build()))?;
            Ok(spec)
        });
        match result {
            Ok(spec) => Some(DaemonMsg::Policy {
                name: spec.to_string(),
            }),
            Err(e) => error(e.to_string()),
        }
    }

    /// The queues of process `pid` (all, or its `queue`) an operator's `what` may act on: this
    /// peer may see and hint them. The refusal to send back otherwise.
    fn operated(
        &self,
        pid: u32,
        queue: Option<u32>,
        what: &str,
    ) -> Result<Vec<ProcessQueue>, Option<DaemonMsg>> {
        if pid == UNSEEN_PID {
            return Err(error(format!(
                "{what} process 0 refused: pid 0 names no one process (every client in a PID \
                 namespace this daemon cannot see has pid 0 here); run the daemon in the host's \
                 PID namespace (hostPID) to tell them apart"
            )));
        }
        let authority = &self.shared.authority;
        let targets: Vec<_> = self
            .shared
            .registry
            .of_process(pid)
            .into_iter()
            .filter(|t| {
                queue.is_none_or(|q| q == t.local) && authority.may_see(&self.peer, &t.owner)
            })
            .collect();
        if targets.is_empty() {
            return Err(error(format!(
                "process {pid} has no such queues you may see"
            )));
        }
        if let Some(t) = targets
            .iter()
            .find(|t| !authority.may_hint(&self.peer, &t.owner))
        {
            return Err(error(format!(
                "{what} process {pid} refused: it belongs to uid {}, and uid {} is not root, \
                 the daemon's user, or named in authority.hint_others",
                t.owner.uid, self.peer.uid
            )));
        }
        Ok(targets)
    }

    /// Share this peer's tenant bounds (`[limits] tenant_*`) out evenly over the tenant's
    /// queues now, as its queue count changed: each queue's client is told its share.
    fn rebalance(&self) {
        let limits = self.shared.admission.limits();
        let (pending, inflight) = (limits.tenant_max_pending, limits.tenant_inflight_us);
        if pending.is_none() && inflight.is_none() {
            return;
        }
        let queues = self.shared.registry.of_tenant(self.peer.uid);
        let n = queues.len().max(1);
        let max_pending = pending.map(|p| u32::try_from((p / n).max(1)).unwrap_or(u32::MAX));
        let inflight_us = inflight.map(|t| (t / n as u64).max(1));
        for (queue, outbox) in &queues {
            outbox.push(&DaemonMsg::Bounds {
                queue: *queue,
                max_pending,
                inflight_us,
            });
            outbox.flush();
        }
    }

    /// Forward a mode switch to the owner of each queue (its agent applies it; its next
    /// statistics show it).
    fn set_mode(&self, pid: u32, queue: Option<u32>, mode: WireMode) -> Option<DaemonMsg> {
        let targets = match self.operated(pid, queue, "switching the mode of") {
            Ok(t) => t,
            Err(refusal) => return refusal,
        };
        for t in &targets {
            t.outbox.push(&DaemonMsg::SetMode {
                queue: t.local,
                mode,
            });
            t.outbox.flush();
        }
        tracing::info!(
            "uid {} switched {} queue(s) of process {pid} to {}",
            self.peer.uid,
            targets.len(),
            mode.name()
        );
        Some(DaemonMsg::Done)
    }

    fn hint_process(&self, pid: u32, queue: Option<u32>, hint: WireHint) -> Option<DaemonMsg> {
        let targets = match self.operated(pid, queue, "hinting") {
            Ok(t) => t,
            Err(refusal) => return refusal,
        };
        if let Err(why) = self.check_hint(hint) {
            return error(format!("hinting process {pid} refused: {why}"));
        }
        let hint: Hint = hint.into();
        let now = clock::now();
        let result = self.shared.core.with(|d| {
            targets
                .iter()
                .try_for_each(|t| d.event(now, Event::Hint { queue: t.id, hint }))
        });
        match result {
            Ok(()) => Some(DaemonMsg::Done),
            Err(e) => error(e.to_string()),
        }
    }

    /// The queues with a daemon id of at least `from` that this peer may see, one page.
    fn top_page(&self, from: u32) -> DaemonMsg {
        let (mut queues, _) = self.shared.core.snapshot();
        queues.retain(|q| q.view.id.0 >= from);
        queues.sort_unstable_by_key(|q| q.view.id);
        let mut rows = Vec::with_capacity(TOP_PAGE_ROWS.min(queues.len()));
        let mut next = None;
        for q in &queues {
            let Some((owner, local, stats)) = self.shared.registry.owner(q.view.id) else {
                continue;
            };
            if !self.shared.authority.may_see(&self.peer, &owner) {
                continue;
            }
            if rows.len() == TOP_PAGE_ROWS {
                next = Some(q.view.id.0);
                break;
            }
            rows.push(TopRow {
                pid: owner.pid,
                uid: owner.uid,
                process: owner.name,
                device: q.view.device.0,
                queue: local,
                hints: q.view.hints.into(),
                ready: q.view.ready,
                suspended: q.suspended,
                stats,
            });
        }
        DaemonMsg::Top { rows, next }
    }
}
