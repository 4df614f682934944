//! The launcher thread of one XQueue: it turns observed completions into the queue's state and
//! launches what they make possible (the commands that waited for a synchronization point).
//!
//! Completions arrive as messages from the backend's completion callbacks, so the launcher never
//! blocks on the hardware. Where the backend runs the queue's completion hook (`refill.rs`),
//! synchronization points nobody waits for are observed and refilled on the completing thread
//! instead, and the launcher is left with waited-for completions, cancels and closing.
//! Submissions, suspend, resume and reconfiguration do not go through it: they act on the
//! shared machine directly and launch what they allow on their own thread (`machine.rs`),
//! saving the wake-up a hop through here would cost.

use crate::clock;
use crate::hwqueue::HwQueue;
use crate::machine::SharedMachine;
use crate::msg::Msg;
use crate::refill::Deferral;
use crate::scheduler::SchedLink;
use crate::shared::Tracker;
use crossbeam_channel::Receiver;
use std::sync::Arc;
use xsched_core::{CommandId, Nanos};

pub(crate) struct Launcher<H: HwQueue> {
    pub(crate) machine: Arc<SharedMachine<H>>,
    pub(crate) rx: Receiver<Msg>,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) sched: Option<SchedLink>,
    /// The queue's completion hook, for counting the wake-ups it did not save.
    pub(crate) deferral: Arc<Deferral>,
}

/// Marks the tracker closed however the launcher ends, so no waiter hangs on a dead thread.
struct CloseOnExit(Arc<Tracker>);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        self.0.close();
    }
}

struct LauncherLoop<H: HwQueue> {
    l: Launcher<H>,
    watching: bool,
    closing: bool,
}

impl<H: HwQueue> Launcher<H> {
    pub(crate) fn run(self) {
        let _close = CloseOnExit(self.tracker.clone());
        let mut run = LauncherLoop {
            l: self,
            watching: false,
            closing: false,
        };
        loop {
            run.l.machine.launch_ready(clock::now());
            if run.closing && run.l.machine.is_idle() {
                break;
            }
            let Ok(msg) = run.l.rx.recv() else { break };
            run.handle(msg);
            // Take whatever else arrived before launching once for all of it.
            while let Ok(msg) = run.l.rx.try_recv() {
                run.handle(msg);
            }
        }
        if run.watching {
            run.l.tracker.unwatch();
        }
        if let Some(sched) = run.l.sched.take() {
            sched.unregister();
        }
    }
}

impl<H: HwQueue> LauncherLoop<H> {
    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Synced(cmd, at) => {
                self.l.deferral.launcher_woken();
                self.observe(cmd, Some(at));
            }
            Msg::Observe => self.observe_watermark(),
            Msg::Cancel(reply) => {
                let cancelled = self.l.machine.cancel_pending();
                let n = cancelled.clone().count();
                self.l.tracker.publish_cancelled(cancelled);
                self.settle_in_flight();
                let _ = reply.send(n);
            }
            Msg::Close => {
                self.closing = true;
                if let Some(sched) = self.l.sched.take() {
                    sched.unregister();
                }
                if let Err(e) = self.l.machine.close() {
                    tracing::warn!("resuming a closing queue: {e}");
                }
                self.settle_in_flight();
            }
        }
    }

    /// Make sure commands already in flight are observed even without a sync point after them
    /// (after a cancel or while closing), and report idleness if nothing is left.
    fn settle_in_flight(&mut self) {
        if self.l.machine.report_if_idle() {
            return;
        }
        if !self.watching {
            self.watching = true;
            self.l.tracker.watch();
        }
        self.observe_watermark();
    }

    /// Observe what the hardware watermark says completed (when exactly is not known).
    fn observe_watermark(&mut self) {
        let done = self.l.tracker.hw_done();
        if done > 0 {
            self.observe(CommandId(done - 1), None);
        }
    }

    /// `cmd` completed (at `completed_at`, when the backend's callback said so).
    fn observe(&mut self, cmd: CommandId, completed_at: Option<Nanos>) {
        let Some(synced) = self.l.machine.observe(cmd, completed_at) else {
            return;
        };
        // No `Completed` event: policies judge service by time, not completion counts (see
        // `xsched_core::scheduler`), and each event would cost the scheduler a wake-up per
        // synchronization point. (An idle queue was reported idle by the machine.)
        if synced.now_idle && self.watching {
            self.watching = false;
            self.l.tracker.unwatch();
        }
    }
}
