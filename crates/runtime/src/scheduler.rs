//! The scheduler thread: the in-process scheduler (`XSCHED_SCHEDULER=local`), and the daemon's.
//!
//! It owns a core [`Scheduler`]: queues send it events over a channel, it runs the policy, and
//! applies each resulting operation through the queue's [`Control`]. It sleeps in a channel
//! receive (with a deadline when the policy asked for a timer), so an idle scheduler costs no
//! CPU. The same thread serves the daemon, where a queue's `Control` sends the operation to
//! its client process instead of to a launcher.

use crate::clock;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use xsched_core::{
    CoreError, DeviceId, Event, Nanos, Operation, Policy, QueueHints, QueueId, QueueView,
    Scheduler, policy,
};
use xsched_proto::QueueStats;

/// Applies an operation to one queue.
pub type Control = Box<dyn Fn(Operation) + Send>;

/// Reads a queue's statistics (for the daemon's `xsched top`).
pub type StatsSource = Arc<dyn Fn() -> QueueStats + Send + Sync>;

/// A queue as the scheduler sees it, with its current decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// What the policy sees.
    pub view: QueueView,
    /// Whether the scheduler has it suspended.
    pub suspended: bool,
}

/// A message to a scheduling thread (the local scheduler or the client agent).
pub(crate) enum SchedMsg {
    Register {
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
        stats: StatsSource,
    },
    Event(Nanos, Event),
    SetPolicy(Box<dyn Policy>, String),
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
    pub fn event(&self, event: Event) {
        // If the scheduler is gone the queue simply runs unscheduled.
        let _ = self.tx.send(SchedMsg::Event(clock::now(), event));
    }

    /// The queue is gone.
    pub fn unregister(self) {
        self.event(Event::Unregister(self.queue));
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
    pub fn start(policy: Box<dyn Policy>) -> std::io::Result<SchedulerThread> {
        SchedulerThread::spawn("xsched-sched", move |rx| run(Dispatcher::new(policy), &rx))
    }

    /// Start a thread consuming scheduler messages with `body`.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Receiver<SchedMsg>) + Send + 'static,
    ) -> std::io::Result<SchedulerThread> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(rx))?;
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
    ) -> SchedLink {
        let _ = self.tx.send(SchedMsg::Register {
            queue,
            device,
            hints,
            control,
            stats,
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

    /// Switch to the policy called `name`; the next decision re-decides every queue.
    pub fn set_policy(&self, name: &str) -> Result<(), CoreError> {
        let policy = policy::by_name(name)?;
        let _ = self.tx.send(SchedMsg::SetPolicy(policy, name.to_string()));
        Ok(())
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

/// The core scheduler together with the controls of its queues: what the scheduler thread
/// drives from its channel, and what the daemon drives from its connections.
pub struct Dispatcher {
    sched: Scheduler,
    controls: HashMap<QueueId, Control>,
}

impl Dispatcher {
    /// A dispatcher running `policy`.
    pub fn new(policy: Box<dyn Policy>) -> Dispatcher {
        Dispatcher {
            sched: Scheduler::new(policy),
            controls: HashMap::new(),
        }
    }

    /// A new queue, whose operations `control` applies.
    pub fn register(
        &mut self,
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
    ) -> Result<(), CoreError> {
        self.sched.handle_event(
            clock::now(),
            Event::Register {
                queue,
                device,
                hints,
            },
        )?;
        self.controls.insert(queue, control);
        Ok(())
    }

    /// Feed one event observed at `at`.
    pub fn event(&mut self, at: Nanos, event: Event) -> Result<(), CoreError> {
        if let Event::Unregister(q) = event {
            self.controls.remove(&q);
        }
        self.sched.handle_event(at, event)
    }

    /// Replace the policy.
    pub fn set_policy(&mut self, policy: Box<dyn Policy>) {
        self.sched.set_policy(policy);
    }

    /// Decide (if anything changed) and apply every resulting operation.
    pub fn dispatch(&mut self) {
        while let Some(op) = self.sched.poll_operation() {
            if let Some(control) = self.controls.get(&op.queue()) {
                control(op);
            }
        }
    }

    /// When the policy next needs [`timeout`](Self::timeout).
    pub fn next_timer(&mut self) -> Option<Nanos> {
        self.sched.poll_timeout()
    }

    /// The clock reached the time [`next_timer`](Self::next_timer) asked for.
    pub fn timeout(&mut self, now: Nanos) {
        self.sched.handle_timeout(now);
    }

    /// Every queue with its current decision, and the policy's name.
    pub fn snapshot(&mut self) -> (Vec<QueueSnapshot>, &'static str) {
        self.dispatch();
        let queues = self
            .sched
            .queues()
            .iter()
            .map(|v| QueueSnapshot {
                view: *v,
                suspended: self.sched.is_suspended(v.id) == Some(true),
            })
            .collect();
        (queues, self.sched.policy_name())
    }

    /// Resume every suspended queue (nobody will schedule them after this).
    pub fn resume_all(&mut self) {
        for q in self.sched.queues() {
            if self.sched.is_suspended(q.id) == Some(true)
                && let Some(control) = self.controls.get(&q.id)
            {
                control(Operation::Resume(q.id));
            }
        }
    }
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("scheduler", &self.sched)
            .finish()
    }
}

fn run(mut d: Dispatcher, rx: &Receiver<SchedMsg>) {
    loop {
        let msg = match d.next_timer() {
            Some(at) => rx.recv_deadline(clock::instant_of(at)),
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
            Err(RecvTimeoutError::Timeout) => d.timeout(clock::now()),
            Err(RecvTimeoutError::Disconnected) => return,
        }
        d.dispatch();
    }
}

/// Apply one message; false means shut down.
fn handle(d: &mut Dispatcher, msg: SchedMsg) -> bool {
    let result = match msg {
        SchedMsg::Register {
            queue,
            device,
            hints,
            control,
            stats: _,
        } => d.register(queue, device, hints, control),
        SchedMsg::Event(at, event) => d.event(at, event),
        SchedMsg::SetPolicy(policy, _) => {
            d.set_policy(policy);
            Ok(())
        }
        SchedMsg::Snapshot(reply) => {
            let _ = reply.send(d.snapshot());
            Ok(())
        }
        SchedMsg::Shutdown => {
            d.resume_all();
            return false;
        }
    };
    if let Err(e) = result {
        tracing::warn!("scheduler: {e}");
    }
    true
}
