//! The XQueue: a preemptible software queue in front of one hardware queue.
//!
//! Submitting sends the command to the queue's launcher thread, which launches progressively;
//! a [`CommandHandle`] waits for one command, [`XQueue::wait_all`] for everything submitted.
//! Dropping (or [`XQueue::close`]-ing) a queue **drains** it: it leaves the scheduler, resumes
//! if suspended, and returns once every submitted command has completed. To drop work instead,
//! call [`XQueue::cancel_pending`] first: cancelled commands report [`CommandError::Cancelled`]
//! to their waiters. No command is silently lost.

use crate::account::QueueAccount;
use crate::completion::CompletionHook;
use crate::error::{CommandError, HwError, RuntimeError};
use crate::hwqueue::HwQueue;
use crate::launcher::Launcher;
use crate::machine::SharedMachine;
use crate::mode::{ModeCell, RolloutMode};
use crate::msg::Msg;
use crate::options::QueueOptions;
use crate::refill::{Deferral, Refill, RefillStats};
use crate::scheduler::Steer;
use crate::scheduler::{Control, SchedLink, SchedulerThread, StatsSource, Steerer};
use crate::shared::Tracker;
use crate::sink::QueueSink;
use crate::steer::Steering;
use crossbeam_channel::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use xsched_core::{
    CommandId, CommandMeta, Hint, LaunchConfig, LaunchMachine, Level, QueueEvent, QueueHints,
    QueueId,
};

/// A snapshot of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueState {
    /// Submitted, not yet launched.
    pub pending: usize,
    /// Launched, not yet observed complete.
    pub in_flight: usize,
    /// Commands observed complete so far (ids below this).
    pub completed: u64,
    /// Whether launching is suspended.
    pub suspended: bool,
    /// The preemption level.
    pub level: Level,
}

/// Waits for one submitted command.
#[derive(Clone)]
pub struct CommandHandle {
    id: CommandId,
    tracker: Arc<Tracker>,
    observe: Arc<dyn Fn() + Send + Sync>,
}

impl CommandHandle {
    /// The command's id in its queue (0, 1, 2, ... in submission order).
    pub fn id(&self) -> CommandId {
        self.id
    }

    /// Block until the command completed; its outcome.
    pub fn wait(&self) -> Result<(), CommandError> {
        self.tracker
            .wait(self.id.0, &*self.observe, None)
            .unwrap_or(Err(CommandError::Lost))
    }

    /// Like [`wait`](Self::wait), but give up after `timeout`: `None` if the command has not
    /// completed by then (a suspended queue holds its commands).
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> Option<Result<(), CommandError>> {
        let deadline = std::time::Instant::now() + timeout;
        self.tracker.wait(self.id.0, &*self.observe, Some(deadline))
    }

    /// Whether the command has completed (or was cancelled), without blocking.
    pub fn is_done(&self) -> bool {
        self.tracker.is_settled(self.id.0)
    }
}

impl std::fmt::Debug for CommandHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandHandle")
            .field("id", &self.id)
            .finish()
    }
}

/// A preemptible queue of `H::Command`s in front of the hardware queue `H`.
pub struct XQueue<H: HwQueue> {
    id: QueueId,
    hw: Arc<H>,
    tx: Sender<Msg>,
    tracker: Arc<Tracker>,
    observe: Arc<dyn Fn() + Send + Sync>,
    /// The next command id; held while submitting so ids match the machine's order.
    next_id: Mutex<u64>,
    machine: Arc<SharedMachine<H>>,
    /// Its completion hook (refill on the completing thread).
    deferral: Arc<Deferral>,
    hints: Mutex<QueueHints>,
    /// Its mode and bounds (see [`set_mode`](Self::set_mode)).
    steering: Arc<Steering<H>>,
    sched: Option<SchedLink>,
    thread: Option<JoinHandle<()>>,
}

impl<H: HwQueue> XQueue<H> {
    pub(crate) fn start(
        id: QueueId,
        hw: Arc<H>,
        options: QueueOptions,
        scheduler: Option<&SchedulerThread>,
    ) -> Result<XQueue<H>, RuntimeError> {
        let caps = hw.capabilities();
        let level = options.level.unwrap_or(caps.max_level);
        caps.check_level(level)?;
        let (tx, rx) = crossbeam_channel::unbounded::<Msg>();
        let tracker = Arc::new(Tracker::new(level));
        let deferral = Arc::new(Deferral::new(tx.clone()));
        let machine = Arc::new(SharedMachine::new(
            hw.clone(),
            launch_machine(&hw, &options, level),
            tracker.clone(),
            sinks(&tracker, &tx, &deferral),
            scheduler.map(|s| s.link(id)),
        ));
        install_refill(id, &hw, &deferral, &machine);
        let mode = Arc::new(ModeCell::new(options.mode));
        let steering = Arc::new(Steering::new(
            machine.clone(),
            mode.clone(),
            &options,
            caps.max_level,
        ));
        let link = |s: &SchedulerThread| {
            let (control, stats, steer) = callbacks(id, &steering, &tracker, &machine, &mode);
            s.register(id, hw.device(), options.hints, control, stats, steer)
        };
        let launcher = Launcher {
            machine: machine.clone(),
            rx,
            tracker: tracker.clone(),
            sched: scheduler.map(link),
            deferral: deferral.clone(),
        };
        machine.set_latency_bound(latency_bound(&options.hints));
        let sched = scheduler.map(|s| s.link(id));
        let thread = std::thread::Builder::new()
            .name(format!("xsched-launch-{}", id.0))
            .spawn(move || launcher.run())?;
        let observe_tx = tx.clone();
        Ok(XQueue {
            id,
            hw,
            tx,
            tracker,
            observe: Arc::new(move || {
                let _ = observe_tx.send(Msg::Observe);
            }),
            next_id: Mutex::new(0),
            machine,
            deferral,
            hints: Mutex::new(options.hints),
            steering,
            sched,
            thread: Some(thread),
        })
    }

    /// This queue's id.
    pub fn id(&self) -> QueueId {
        self.id
    }

    /// The hardware queue behind it.
    pub fn hw(&self) -> &Arc<H> {
        &self.hw
    }

    /// Submit a command with no declared duration (the queue's measured average is used).
    pub fn submit(&self, cmd: H::Command) -> Result<CommandHandle, RuntimeError> {
        self.submit_with(cmd, CommandMeta::default())
    }

    /// Submit a command with its scheduling metadata.
    pub fn submit_with(
        &self,
        cmd: H::Command,
        meta: CommandMeta,
    ) -> Result<CommandHandle, RuntimeError> {
        // Tell the scheduler before the command reaches the machine, so the Ready is ordered
        // before that command's Idle; it is reported only if nobody did since the last Idle.
        if self.tracker.looks_idle() {
            self.report_ready();
        }
        let mut next = loop {
            let max_pending = self.steering.max_pending();
            if let Some(max) = max_pending {
                self.tracker.wait_for_room(max);
            }
            let next = self
                .next_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.tracker.is_closed() {
                return Err(RuntimeError::Closed);
            }
            // Another submitter may have taken the room first: then wait again.
            if max_pending.is_none_or(|max| self.tracker.pending() < max) {
                break next;
            }
        };
        // Launched right here when the queue has room and is not suspended (the machine reports
        // Ready itself if the queue was idle and nobody did).
        self.machine.submit(cmd, meta, crate::clock::now());
        let id = CommandId(*next);
        *next += 1;
        Ok(self.handle(id))
    }

    /// Send Ready, unless it was sent since the last Idle.
    fn report_ready(&self) {
        if let Some(s) = &self.sched
            && self.tracker.claim_ready_report()
        {
            s.event(QueueEvent::Ready(self.id));
        }
    }

    /// Block until command `id` of this queue completed; its outcome. An id never submitted
    /// is [`RuntimeError::UnknownCommand`].
    pub fn wait(&self, id: CommandId) -> Result<Result<(), CommandError>, RuntimeError> {
        let submitted = *self
            .next_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if id.0 >= submitted {
            return Err(RuntimeError::UnknownCommand(id));
        }
        Ok(self.handle(id).wait())
    }

    fn handle(&self, id: CommandId) -> CommandHandle {
        CommandHandle {
            id,
            tracker: self.tracker.clone(),
            observe: self.observe.clone(),
        }
    }

    /// The last command submitted so far, if any: [`wait`](Self::wait) on it waits for
    /// everything submitted until now.
    pub fn last_submitted(&self) -> Option<CommandId> {
        let submitted = *self
            .next_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        submitted.checked_sub(1).map(CommandId)
    }

    /// Block until every command submitted so far completed (or was cancelled). Returns the
    /// first failure among them, if any (the others still ran), or `Cancelled` if the last one
    /// was cancelled.
    pub fn wait_all(&self) -> Result<(), CommandError> {
        let Some(CommandId(last)) = self.last_submitted() else {
            return Ok(());
        };
        let submitted = last + 1;
        match self.handle(CommandId(last)).wait() {
            Ok(()) | Err(CommandError::Failed(_)) => self.tracker.first_failure(submitted),
            Err(other) => Err(other),
        }
    }

    /// A snapshot of the queue's state.
    pub fn query(&self) -> QueueState {
        let (pending, in_flight, suspended, level, completed) = self.tracker.state();
        QueueState {
            pending,
            in_flight,
            completed,
            suspended,
            level,
        }
    }

    /// Suspend launching (and deactivate/interrupt at Levels 2/3). For `app` scheduling; under a
    /// scheduler, its next decision may resume the queue.
    pub fn suspend(&self) -> Result<(), RuntimeError> {
        Ok(self.machine.suspend()?)
    }

    /// Resume launching (and reactivate/restore).
    pub fn resume(&self) -> Result<(), RuntimeError> {
        Ok(self.machine.resume()?)
    }

    /// Change the preemption level. Fails if the backend lacks it or the queue is suspended.
    pub fn set_level(&self, level: Level) -> Result<(), RuntimeError> {
        self.machine.set_level(level)
    }

    /// Switch the queue's rollout mode at run time: `observe` releases it and launches
    /// everything at once, ignoring suspensions from then on; `cooperative` and `preemptive`
    /// launch progressively again (with the queue's own launch config, or the default one for a
    /// queue created observing) at Level 1 or the backend's highest, and a queue the scheduler
    /// holds stays held, at the new level.
    pub fn set_mode(&self, mode: RolloutMode) -> Result<(), RuntimeError> {
        self.steering.apply(Steer::Mode(mode))
    }

    /// The launch config in force (the queue's own, its mode's, or capped by its tenant's
    /// share of in-flight time).
    pub fn launch_config(&self) -> LaunchConfig {
        self.machine.config()
    }

    /// Change the launch config (validated by [`LaunchConfig::new`]); applies to the next launch.
    pub fn set_config(&self, config: LaunchConfig) -> Result<(), RuntimeError> {
        self.machine.set_config(config);
        Ok(())
    }

    /// Give the scheduler new advice about this queue. Invalid hints are refused and change
    /// nothing.
    pub fn set_hint(&self, hint: Hint) -> Result<(), RuntimeError> {
        let mut hints = self
            .hints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut updated = *hints;
        updated.apply(hint)?;
        *hints = updated;
        self.machine.set_latency_bound(latency_bound(&updated));
        if let Some(s) = &self.sched {
            s.event(QueueEvent::Hint {
                queue: self.id,
                hint,
            });
        }
        Ok(())
    }

    /// What the queue's commands went through so far (see [`QueueAccount`]).
    pub fn account(&self) -> QueueAccount {
        self.machine.account()
    }

    /// Where its synchronization points were observed and refilled: on the backend's
    /// completing thread (its completion hook) or by waking the launcher thread.
    pub fn refill_stats(&self) -> RefillStats {
        self.deferral.stats()
    }

    /// The hints in force.
    pub fn hints(&self) -> QueueHints {
        *self
            .hints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drop every command not yet launched; their waiters get [`CommandError::Cancelled`].
    /// Commands already in the hardware queue still complete. Returns how many were dropped.
    pub fn cancel_pending(&self) -> Result<usize, RuntimeError> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.tx
            .send(Msg::Cancel(reply))
            .map_err(|_| RuntimeError::Closed)?;
        answer.recv().map_err(|_| RuntimeError::Closed)
    }

    /// Drain and close (what dropping does), reporting the first failed command, if any.
    pub fn close(mut self) -> Result<(), CommandError> {
        let result = self.wait_all();
        self.shut_down();
        result
    }

    fn shut_down(&mut self) {
        let _ = self.tx.send(Msg::Close);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("launcher thread of queue {} panicked", self.id);
        }
        self.deferral.close();
    }
}

/// A queue's launch machine at `level`, launching on while deactivated where its options ask
/// and the backend's deactivation only lowers its priority.
fn launch_machine<H: HwQueue>(hw: &Arc<H>, options: &QueueOptions, level: Level) -> LaunchMachine {
    let mut launch = LaunchMachine::new(options.config, level);
    launch.set_runs_while_deactivated(
        options.yield_when_held && hw.deactivation_only_lowers_priority(),
    );
    launch
}

/// A queue's two completion sinks: for its commands, and for its tails.
fn sinks(
    tracker: &Arc<Tracker>,
    tx: &Sender<Msg>,
    deferral: &Arc<Deferral>,
) -> [Arc<dyn crate::completion::CompletionSink>; 2] {
    let sink = |tails| -> Arc<dyn crate::completion::CompletionSink> {
        Arc::new(QueueSink {
            tracker: tracker.clone(),
            launcher: tx.clone(),
            tails,
            deferral: deferral.clone(),
        })
    };
    [sink(false), sink(true)]
}

/// Refill queue `id` on the completing thread where the backend runs deferred completion work.
fn install_refill<H: HwQueue>(
    id: QueueId,
    hw: &Arc<H>,
    deferral: &Arc<Deferral>,
    machine: &Arc<SharedMachine<H>>,
) {
    let hook = CompletionHook::new(Arc::new(Refill {
        deferral: deferral.clone(),
        machine: Arc::downgrade(machine),
        queue: id,
    }));
    match hw.set_completion_hook(hook) {
        Ok(()) => deferral.activate(),
        Err(HwError::NoCompletionHook) => {}
        Err(e) => tracing::warn!(
            "queue {id}: the backend's completion hook failed ({e}); its launcher thread \
             refills it"
        ),
    }
}

/// What the scheduler holds of queue `id`: its control, its statistics and its steering.
fn callbacks<H: HwQueue>(
    id: QueueId,
    steering: &Arc<Steering<H>>,
    tracker: &Arc<Tracker>,
    machine: &Arc<SharedMachine<H>>,
    mode: &Arc<ModeCell>,
) -> (Control, StatsSource, Steerer) {
    let operated = steering.clone();
    let control: Control = Box::new(move |op| {
        if let Err(e) = operated.operate(op) {
            tracing::warn!("queue {id}: {e}");
        }
    });
    let (tracker, machine, mode) = (tracker.clone(), machine.clone(), mode.clone());
    let stats: StatsSource = Arc::new(move || {
        let mut stats = tracker.stats();
        stats.account = machine.account().into();
        stats.mode = mode.get().map(Into::into);
        stats
    });
    let steer = steering.clone();
    let steer: Steerer = Arc::new(move |request| {
        if let Err(e) = steer.apply(request) {
            tracing::warn!("queue {id}: {request:?}: {e}");
        }
    });
    (control, stats, steer)
}

/// The latency a command may take before it counts as a miss: the SLO, else the deadline.
fn latency_bound(hints: &QueueHints) -> Option<xsched_core::Nanos> {
    hints.slo.or(hints.deadline)
}

impl<H: HwQueue> Drop for XQueue<H> {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl<H: HwQueue> std::fmt::Debug for XQueue<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XQueue")
            .field("id", &self.id)
            .field("state", &self.query())
            .finish()
    }
}
