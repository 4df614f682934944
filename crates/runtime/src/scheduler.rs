//! The scheduler thread: the in-process scheduler (`XSCHED_SCHEDULER=local`).
//!
//! It owns a core [`Dispatcher`] whose handles are the queues' [`Control`]s: queues send it
//! events over a channel, it runs the policy, and applies each resulting operation through the
//! queue's control. It sleeps in a channel receive, until the policy's timer if it asked for
//! one, and at most [`CpuGuard::look_within`] (by default 100 ms: a look at the machine's CPU
//! pressure, [`crate::prompt`]), so an idle scheduler costs next to no CPU. The daemon drives the same core dispatcher from
//! its connections (`xsched-daemon`).

use crate::clock;
use crate::error::RuntimeError;
use crate::mode::RolloutMode;
use crate::prompt::CpuGuard;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xsched_core::{
    CoreError, DeviceId, Dispatcher, Nanos, Operation, Policy, PolicySpec, QueueEvent, QueueHints,
    QueueId, QueueSnapshot,
};
use xsched_proto::QueueStats;

/// Applies an operation to one queue.
pub type Control = Box<dyn Fn(Operation) + Send>;

/// Reads a queue's statistics (for the daemon's `xsched top`).
pub type StatsSource = Arc<dyn Fn() -> QueueStats + Send + Sync>;

/// One request to a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// Switch to this rollout mode.
    Mode(RolloutMode),
    /// The queue's share of its tenant's bounds (`None`: no bound from the tenant).
    Bounds {
        /// Commands submitted but not launched.
        max_pending: Option<NonZeroUsize>,
        /// Device time launched but unfinished.
        inflight: Option<Nanos>,
    },
}

/// Carries out an operator's or the daemon's request to a queue (`xsched mode set`, a tenant's
/// bounds).
pub type Steerer = Arc<dyn Fn(Steer) + Send + Sync>;

/// A message to a scheduling thread (the local scheduler or the client agent).
pub(crate) enum SchedMsg {
    Register {
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
        stats: StatsSource,
        steer: Steerer,
    },
    Event(Nanos, QueueEvent),
    SetPolicy(Box<dyn Policy>, PolicySpec),
    Snapshot(Sender<(Vec<QueueSnapshot>, &'static str)>),
    Shutdown,
}

/// A queue's line to its scheduler.
pub struct SchedLink {
    pub(crate) queue: QueueId,
    tx: Sender<SchedMsg>,
}

impl SchedLink {
    /// Report an event (stamped with the monotonic clock now).
    pub fn event(&self, event: QueueEvent) {
        if matches!(event, QueueEvent::Ready(_)) {
            crate::stamps::stamp(crate::stamps::Stamp::Ready);
        }
        // If the scheduler is gone the queue simply runs unscheduled.
        let _ = self.tx.send(SchedMsg::Event(clock::now(), event));
    }

    /// The queue is gone.
    pub fn unregister(self) {
        self.event(QueueEvent::Unregister(self.queue));
    }

    /// The queue this link reports for.
    pub fn queue(&self) -> QueueId {
        self.queue
    }
}

/// A thread that schedules queues: the core scheduler (local or daemon) or the client agent.
pub struct SchedulerThread {
    tx: Sender<SchedMsg>,
    thread: Option<JoinHandle<()>>,
}

impl SchedulerThread {
    /// Start the core scheduler running `policy` on its own thread.
    pub fn start(policy: Box<dyn Policy>) -> Result<SchedulerThread, RuntimeError> {
        let thread = SchedulerThread::spawn("xsched-sched", move |rx, mut guard| {
            run(Dispatcher::new(policy), &rx, || {
                guard.check();
                guard.look_within()
            });
        })?;
        Ok(thread)
    }

    /// Start a thread consuming scheduler messages with `body`, which calls its guard's
    /// [`CpuGuard::check`] after each wake-up.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Receiver<SchedMsg>, CpuGuard) + Send + 'static,
    ) -> std::io::Result<SchedulerThread> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // It carries every decision (in-process scheduler, or the agent of the daemon's).
                body(rx, CpuGuard::start())
            })?;
        Ok(SchedulerThread {
            tx,
            thread: Some(thread),
        })
    }

    /// Register a queue whose operations `control` applies; returns its link for events.
    pub fn register(
        &self,
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
        stats: StatsSource,
        steer: Steerer,
    ) -> SchedLink {
        let _ = self.tx.send(SchedMsg::Register {
            queue,
            device,
            hints,
            control,
            stats,
            steer,
        });
        self.link(queue)
    }

    /// Another line for an already registered queue (e.g. the application side, for hints).
    pub fn link(&self, queue: QueueId) -> SchedLink {
        SchedLink {
            queue,
            tx: self.tx.clone(),
        }
    }

    /// Switch to `policy`; the next decision re-decides every queue.
    pub fn set_policy(&self, policy: &PolicySpec) {
        let _ = self
            .tx
            .send(SchedMsg::SetPolicy(policy.build(), policy.clone()));
    }

    /// Every queue with its decision, and the policy's name (empty if the thread is gone).
    pub fn snapshot(&self) -> (Vec<QueueSnapshot>, &'static str) {
        let (reply, answer) = crossbeam_channel::bounded(1);
        if self.tx.send(SchedMsg::Snapshot(reply)).is_err() {
            return (Vec::new(), "");
        }
        answer.recv().unwrap_or((Vec::new(), ""))
    }
}

impl Drop for SchedulerThread {
    fn drop(&mut self) {
        let _ = self.tx.send(SchedMsg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for SchedulerThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerThread").finish()
    }
}

/// Apply an operation through its queue's control.
fn apply(control: &Control, op: Operation) {
    control(op);
}

/// The scheduler's loop; after each wake-up it calls `woke` (which checks the thread's
/// priority), which says how long the thread may sleep at most before it wakes for it again.
fn run(
    mut d: Dispatcher<Control>,
    rx: &Receiver<SchedMsg>,
    mut woke: impl FnMut() -> Option<Duration>,
) {
    loop {
        let look = woke().map(|within| Instant::now() + within);
        let timer = d.next_timer().map(clock::instant_of);
        let wake = match (timer, look) {
            (Some(t), Some(l)) => Some(t.min(l)),
            (t, l) => t.or(l),
        };
        let msg = match wake {
            Some(at) => rx.recv_deadline(at),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match msg {
            Ok(msg) => {
                if !handle(&mut d, msg) {
                    return;
                }
                // Take everything already queued before deciding, so events that cancel out
                // at one instant cost no operations.
                while let Ok(msg) = rx.try_recv() {
                    if !handle(&mut d, msg) {
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                // The policy's timer, or only a look at the machine.
                let now = clock::now();
                if d.next_timer().is_some_and(|t| t <= now) {
                    d.timeout(now);
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        d.dispatch(apply);
    }
}

/// Apply one message; false means shut down.
fn handle(d: &mut Dispatcher<Control>, msg: SchedMsg) -> bool {
    let result = match msg {
        // A closing queue's last Idle or Ready can arrive after its Unregister: nothing to do.
        SchedMsg::Event(at, event @ (QueueEvent::Idle(_) | QueueEvent::Ready(_))) => {
            match d.event(at, event) {
                Err(CoreError::UnknownQueue(q)) => {
                    tracing::debug!("scheduler: event for {q}, already gone");
                    Ok(())
                }
                other => other,
            }
        }
        SchedMsg::Event(at, event) => d.event(at, event),
        SchedMsg::Register {
            queue,
            device,
            hints,
            control,
            ..
        } => d.register(clock::now(), queue, device, hints, control),
        SchedMsg::SetPolicy(policy, _) => d.set_policy(policy),
        SchedMsg::Snapshot(reply) => {
            let queues = d.snapshot(apply);
            let _ = reply.send((queues, d.policy_name()));
            Ok(())
        }
        SchedMsg::Shutdown => {
            d.release_all(apply);
            return false;
        }
    };
    if let Err(e) = result {
        tracing::warn!("scheduler: {e}");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn an_idle_scheduler_wakes_to_look_at_the_machine() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let wakes = Arc::new(AtomicU32::new(0));
        let thread = {
            let wakes = wakes.clone();
            std::thread::spawn(move || {
                run(Dispatcher::new(PolicySpec::default().build()), &rx, || {
                    wakes.fetch_add(1, Ordering::SeqCst);
                    Some(Duration::from_millis(1))
                });
            })
        };
        // No message, no timer: only the looks wake it.
        let give_up = Instant::now() + Duration::from_secs(10);
        while wakes.load(Ordering::SeqCst) < 3 && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        let woke = wakes.load(Ordering::SeqCst);
        let _ = tx.send(SchedMsg::Shutdown);
        thread.join().expect("scheduler thread");
        assert!(woke >= 3, "woke {woke} times with nothing to do");
    }
}
