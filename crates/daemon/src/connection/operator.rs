//! What a connection may ask of other processes' queues, as an operator (`xsched policy set`,
//! `xsched hint --pid`, `xsched mode set`, `xsched top`): each asked of the `[authority]` rules
//! before it acts or shows anything. Kept apart from the session's own queues because every one
//! of these reaches other clients.

use super::session::{Session, UNSEEN_PID, error};
use crate::registry::ProcessQueue;
use xsched_core::{Hint, PolicySpec, QueueEvent};
use xsched_proto::{DaemonMsg, TOP_PAGE_ROWS, TopRow, WireHint, WireRolloutMode};
use xsched_sys::clock;

impl Session<'_> {
    /// `SetPolicy`: every queue switches to policy `name`, if this peer may set it.
    pub(super) fn set_policy(&self, name: &str) -> Option<DaemonMsg> {
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

    /// Forward a mode switch to the owner of each queue (its agent applies it; its next
    /// statistics show it).
    pub(super) fn set_mode(
        &self,
        pid: u32,
        queue: Option<u32>,
        mode: WireRolloutMode,
    ) -> Option<DaemonMsg> {
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

    pub(super) fn hint_process(
        &self,
        pid: u32,
        queue: Option<u32>,
        hint: WireHint,
    ) -> Option<DaemonMsg> {
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
                .try_for_each(|t| d.event(now, QueueEvent::Hint { queue: t.id, hint }))
        });
        match result {
            Ok(()) => Some(DaemonMsg::Done),
            Err(e) => error(e.to_string()),
        }
    }

    /// The queues with a daemon id of at least `from` that this peer may see, one page.
    pub(super) fn top_page(&self, from: u32) -> DaemonMsg {
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
