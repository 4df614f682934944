//! A connection past its handshake: each frame read on its thread and handled inline on the
//! shared scheduler (its own queues registered, readied, hinted and removed), and its queues
//! released and its tenant's bounds shared out again however it ends.

use crate::admission::Admitted;
use crate::core::OpTarget;
use crate::error::DaemonError;
use crate::outbox::Outbox;
use crate::peer::Peer;
use crate::shared::DaemonState;
use std::sync::Arc;
use xsched_core::error::chain_text;
use xsched_core::{DeviceId, QueueEvent, QueueId};
use xsched_proto::{ClientMsg, DaemonMsg, ProtoError, WireHint, WireHints, read_frame};
use xsched_sys::clock;
use xsched_sys::prompt::CpuGuard;
use xsched_sys::stamps;

/// The pid `SO_PEERCRED` gives for a peer in a PID namespace the daemon's cannot see (a
/// container's, when the daemon has a namespace of its own): shared by every such peer, so it
/// names none of them.
pub(super) const UNSEEN_PID: u32 = 0;

/// A connection past its handshake.
pub(crate) struct Session<'a> {
    pub(super) shared: &'a DaemonState,
    conn: u64,
    pub(super) peer: Peer,
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
                let _ = d.event(now, QueueEvent::Unregister(q));
            }
        });
        tracing::info!(
            "client {} ({}) gone; its queues released",
            self.peer.pid,
            self.peer.name
        );
    }
}

pub(super) fn error(message: String) -> Option<DaemonMsg> {
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

    pub(super) fn read_loop(&self) {
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
                    let why = chain_text(&e);
                    tracing::warn!(
                        "client {} ({}): {why}; closing its connection",
                        self.peer.pid,
                        self.peer.name
                    );
                    if matches!(e, ProtoError::Malformed(_) | ProtoError::TooLarge(_)) {
                        self.outbox.send(&DaemonMsg::Error {
                            message: format!("{why}; closing the connection"),
                        });
                    }
                    return;
                }
            }
        }
    }

    /// A priority this peer may not use, refused with the reason.
    pub(super) fn check_hint(&self, hint: WireHint) -> Result<(), DaemonError> {
        match hint {
            WireHint::Priority(p) => self.shared.authority.check_priority(&self.peer, p),
            _ => Ok(()),
        }
    }

    /// Run an event on one of this connection's queues.
    fn on_queue(&self, local: u32, make: impl FnOnce(QueueId) -> QueueEvent) -> Option<DaemonMsg> {
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
                let answer = self.on_queue(queue, QueueEvent::Ready);
                stamps::stamp(stamps::Stamp::Decided);
                answer
            }
            ClientMsg::Idle { queue } => self.on_queue(queue, QueueEvent::Idle),
            ClientMsg::Hint { queue, hint } => match self.check_hint(hint) {
                Ok(()) => self.on_queue(queue, |q| QueueEvent::Hint {
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
        let target = OpTarget {
            outbox: self.outbox.clone(),
            queue,
        };
        let now = clock::now();
        let result = shared.core.with(|d| {
            if let Some(old) = old {
                let _ = d.event(now, QueueEvent::Unregister(old));
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
                let result = shared
                    .core
                    .with(|d| d.event(now, QueueEvent::Unregister(q)));
                self.rebalance();
                result.err().and_then(|e| error(e.to_string()))
            }
            None => error(format!("unknown queue {queue}")),
        }
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
}
