//! The launcher thread of one XQueue: the only owner of its launch machine.
//!
//! Everything that changes the machine arrives as a message (submissions, observed completions,
//! suspend/resume, reconfiguration), so the machine needs no lock and a suspend is applied one
//! thread wake-up after it is asked for. The launcher never blocks on the hardware: completions
//! come back as messages from the backend's completion callbacks.

use crate::clock;
use crate::completion::{Completion, CompletionSink};
use crate::error::RuntimeError;
use crate::hwqueue::HwQueue;
use crate::latency::RecentLatency;
use crate::scheduler::SchedLink;
use crate::shared::Tracker;
use crate::suspend::Suspender;
use crossbeam_channel::{Receiver, Sender};
use std::collections::VecDeque;
use std::sync::Arc;
use xsched_core::{CommandId, CommandMeta, Event, LaunchConfig, LaunchMachine, Level, QueueId};

/// A message to the launcher.
pub(crate) enum Msg<C> {
    /// A new command.
    Submit(C, CommandMeta),
    /// The backend finished `cmd` (a sync point, or anything while watched).
    Synced(CommandId),
    /// Look at the hardware watermark now.
    Observe,
    /// Stop launching (the hardware half is applied by the sender, see `suspend.rs`).
    Suspend,
    /// Launch again.
    Resume,
    /// Change the level; the answer goes back on the channel.
    SetLevel(Level, Sender<Result<(), RuntimeError>>),
    /// Change the launch config.
    SetConfig(LaunchConfig),
    /// Lift or restore the launch limits (`Operation::Protect`).
    Protect(bool),
    /// Drop every pending command; the count goes back on the channel.
    Cancel(Sender<usize>),
    /// Drain what was submitted, then stop.
    Close,
}

pub(crate) struct Launcher<H: HwQueue> {
    pub(crate) hw: Arc<H>,
    pub(crate) machine: LaunchMachine,
    pub(crate) rx: Receiver<Msg<H::Command>>,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) sink: Arc<dyn CompletionSink>,
    pub(crate) sched: Option<SchedLink>,
    pub(crate) suspender: Arc<Suspender<H>>,
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
    payloads: VecDeque<H::Command>,
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
            payloads: VecDeque::new(),
            submitted: 0,
            watching: false,
            closing: false,
        };
        loop {
            run.launch_ready();
            run.publish();
            if run.closing && run.l.machine.is_idle() {
                break;
            }
            let Ok(msg) = run.l.rx.recv() else { break };
            run.handle(msg);
            // Take whatever else arrived before launching and publishing once for all of it.
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
    fn launch_ready(&mut self) {
        while let Some(launch) = self.l.machine.poll_launch(clock::now()) {
            let Some(cmd) = self.payloads.pop_front() else {
                tracing::error!("launch machine and payload queue disagree; dropping launch");
                break;
            };
            let done = Completion::new(self.l.sink.clone(), launch.cmd, launch.sync);
            self.l.hw.launch(cmd, done);
        }
    }

    fn publish(&self) {
        let m = &self.l.machine;
        self.l
            .tracker
            .publish_state(m.pending(), m.in_flight(), m.is_suspended(), m.level());
    }

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
                self.payloads.push_back(cmd);
                self.submitted += 1;
                let (_, was_idle) = self.l.machine.submit(meta);
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
            Msg::Suspend => {
                if !self.closing {
                    self.l.machine.suspend();
                }
            }
            Msg::Resume => {
                self.l.machine.resume();
            }
            Msg::SetLevel(level, reply) => {
                let result = self.set_level(level);
                let _ = reply.send(result);
            }
            Msg::SetConfig(config) => self.l.machine.set_config(config),
            Msg::Protect(on) => self.l.machine.set_protected(on),
            Msg::Cancel(reply) => {
                let n = self.l.machine.cancel_pending();
                self.payloads.clear();
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
                self.l.suspender.close();
                self.l.machine.resume();
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
        let Some(synced) = self.l.machine.on_synced(cmd, now) else {
            return;
        };
        if let Some(p99) = self
            .latency
            .completed(synced.last.0 - synced.first.0 + 1, now)
        {
            self.l.tracker.publish_recent_p99(p99);
        }
        // State first, so whoever the completion wakes sees a query that agrees with it.
        self.publish();
        self.l.tracker.publish_done(synced.last.0 + 1);
        // No `Completed` event: no local policy reads completion counts, and each event would
        // cost the scheduler thread a wake-up per synchronization point.
        if synced.now_idle {
            self.report_idle();
            if self.watching {
                self.watching = false;
                self.l.tracker.unwatch();
            }
        }
    }

    fn set_level(&mut self, level: Level) -> Result<(), RuntimeError> {
        self.l.hw.capabilities().check_level(level)?;
        if self.l.machine.set_level(level) {
            Ok(())
        } else {
            Err(RuntimeError::Suspended)
        }
    }
}
