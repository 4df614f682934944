//! The launcher thread of one XQueue: it moves submitted commands into the launch machine,
//! launches what the machine allows, and turns observed completions into the queue's state.
//!
//! Submissions and completions arrive as messages, so the launcher never blocks on the
//! hardware: completions come back from the backend's completion callbacks. Suspend, resume and
//! reconfiguration do not go through it: they act on the shared machine directly
//! (`machine.rs`) and wake it when launching may have become possible.

use crate::clock;
use crate::hwqueue::HwQueue;
use crate::latency::RecentLatency;
use crate::machine::SharedMachine;
use crate::scheduler::SchedLink;
use crate::shared::Tracker;
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use xsched_core::{CommandId, CommandMeta, Event, QueueId};

/// A message to the launcher.
pub(crate) enum Msg<C> {
    /// A new command.
    Submit(C, CommandMeta),
    /// The backend finished `cmd` (a sync point, or anything while watched).
    Synced(CommandId),
    /// Look at the hardware watermark now.
    Observe,
    /// Launching may be possible again (resumed, protected, reconfigured).
    Wake,
    /// Drop every pending command; the count goes back on the channel.
    Cancel(Sender<usize>),
    /// Drain what was submitted, then stop.
    Close,
}

pub(crate) struct Launcher<H: HwQueue> {
    pub(crate) machine: Arc<SharedMachine<H>>,
    pub(crate) rx: Receiver<Msg<H::Command>>,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) sched: Option<SchedLink>,
}

/// Marks the tracker closed however the launcher ends, so no waiter hangs on a dead thread.
struct CloseOnExit(Arc<Tracker>);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        self.0.close();
    }
}

struct Run<H: HwQueue> {
    l: Launcher<H>,
    latency: RecentLatency,
    submitted: u64,
    watching: bool,
    closing: bool,
}

impl<H: HwQueue> Launcher<H> {
    pub(crate) fn run(self) {
        let _close = CloseOnExit(self.tracker.clone());
        let mut run = Run {
            l: self,
            latency: RecentLatency::new(clock::now()),
            submitted: 0,
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

impl<H: HwQueue> Run<H> {
    /// Tell the scheduler (if any) about this queue.
    fn event(&self, make: impl FnOnce(QueueId) -> Event) {
        if let Some(sched) = &self.l.sched {
            sched.event(make(sched.queue));
        }
    }

    fn handle(&mut self, msg: Msg<H::Command>) {
        match msg {
            Msg::Submit(cmd, meta) => {
                self.latency.submitted(clock::now());
                self.submitted += 1;
                let was_idle = self.l.machine.submit(cmd, meta);
                if was_idle && self.l.tracker.claim_ready_report() {
                    self.event(Event::Ready);
                }
            }
            Msg::Synced(cmd) => self.observe(cmd),
            Msg::Observe => {
                let done = self.l.tracker.hw_done();
                if done > 0 {
                    self.observe(CommandId(done - 1));
                }
            }
            Msg::Wake => {}
            Msg::Cancel(reply) => {
                let n = self.l.machine.cancel_pending();
                self.latency.cancelled(n);
                let first = self.submitted - n as u64;
                self.l.tracker.publish_cancelled(first..self.submitted);
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
        if self.l.machine.is_idle() {
            self.report_idle();
            return;
        }
        if !self.watching {
            self.watching = true;
            self.l.tracker.watch();
        }
        let done = self.l.tracker.hw_done();
        if done > 0 {
            self.observe(CommandId(done - 1));
        }
    }

    /// Idle first, then allow the next Ready: a Ready sent after this is ordered after the Idle.
    fn report_idle(&self) {
        self.event(Event::Idle);
        self.l.tracker.reset_ready_report();
    }

    fn observe(&mut self, cmd: CommandId) {
        let now = clock::now();
        let Some(synced) = self.l.machine.synced(cmd, now) else {
            return;
        };
        if let Some(p99) = self
            .latency
            .completed(synced.last.0 - synced.first.0 + 1, now)
        {
            self.l.tracker.publish_recent_p99(p99);
        }
        // The machine published its state first, so whoever the completion wakes sees a query
        // that agrees with it.
        self.l.tracker.publish_done(synced.last.0 + 1);
        // No `Completed` event: policies judge service by time, not completion counts (see
        // `xsched_core::scheduler`), and each event would cost the scheduler a wake-up per
        // synchronization point.
        if synced.now_idle {
            self.report_idle();
            if self.watching {
                self.watching = false;
                self.l.tracker.unwatch();
            }
        }
    }
}
