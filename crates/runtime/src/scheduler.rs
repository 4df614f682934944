//! The in-process scheduler thread (`XSCHED_SCHEDULER=local`).
//!
//! It owns the core [`Scheduler`]: launchers send it events over a channel, it runs the policy,
//! and sends each affected launcher a suspend or resume. It sleeps in a channel receive (with a
//! deadline when the policy asked for a timer), so an idle scheduler costs no CPU.

use crate::clock;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::thread::JoinHandle;
use xsched_core::{DeviceId, Event, Nanos, Operation, Policy, QueueHints, QueueId, Scheduler};

/// Applies an operation to one queue (sends its launcher a message).
pub(crate) type Control = Box<dyn Fn(Operation) + Send>;

pub(crate) enum SchedMsg {
    Register {
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
    },
    Event(Nanos, Event),
    SetPolicy(Box<dyn Policy>),
    Shutdown,
}

/// A queue's line to the scheduler.
pub(crate) struct SchedLink {
    pub(crate) queue: QueueId,
    tx: Sender<SchedMsg>,
}

impl SchedLink {
    pub(crate) fn event(&self, event: Event) {
        // If the scheduler is gone the queue simply runs unscheduled.
        let _ = self.tx.send(SchedMsg::Event(clock::now(), event));
    }

    pub(crate) fn unregister(self) {
        self.event(Event::Unregister(self.queue));
    }
}

/// The scheduler thread and its inbox.
pub(crate) struct LocalScheduler {
    tx: Sender<SchedMsg>,
    thread: Option<JoinHandle<()>>,
}

impl LocalScheduler {
    pub(crate) fn start(policy: Box<dyn Policy>) -> std::io::Result<LocalScheduler> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("xsched-sched".into())
            .spawn(move || run(Scheduler::new(policy), &rx))?;
        Ok(LocalScheduler {
            tx,
            thread: Some(thread),
        })
    }

    /// Register a queue; returns its link for events.
    pub(crate) fn register(
        &self,
        queue: QueueId,
        device: DeviceId,
        hints: QueueHints,
        control: Control,
    ) -> SchedLink {
        let _ = self.tx.send(SchedMsg::Register {
            queue,
            device,
            hints,
            control,
        });
        SchedLink {
            queue,
            tx: self.tx.clone(),
        }
    }

    /// A second line for the same queue (the application side, for hints).
    pub(crate) fn link(&self, queue: QueueId) -> SchedLink {
        SchedLink {
            queue,
            tx: self.tx.clone(),
        }
    }

    pub(crate) fn set_policy(&self, policy: Box<dyn Policy>) {
        let _ = self.tx.send(SchedMsg::SetPolicy(policy));
    }
}

impl Drop for LocalScheduler {
    fn drop(&mut self) {
        let _ = self.tx.send(SchedMsg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(mut sched: Scheduler, rx: &Receiver<SchedMsg>) {
    let mut controls: HashMap<QueueId, Control> = HashMap::new();
    loop {
        let msg = match sched.poll_timeout() {
            Some(at) => rx.recv_deadline(clock::instant_of(at)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match msg {
            Ok(msg) => {
                if !handle(&mut sched, &mut controls, msg) {
                    return;
                }
                // Take everything already queued before deciding, so events that cancel out
                // at one instant cost no operations.
                while let Ok(msg) = rx.try_recv() {
                    if !handle(&mut sched, &mut controls, msg) {
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => sched.handle_timeout(clock::now()),
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Some(op) = sched.poll_operation() {
            let (Operation::Suspend(q) | Operation::Resume(q)) = op;
            if let Some(control) = controls.get(&q) {
                control(op);
            }
        }
    }
}

/// Apply one message; false means shut down.
fn handle(sched: &mut Scheduler, controls: &mut HashMap<QueueId, Control>, msg: SchedMsg) -> bool {
    let result = match msg {
        SchedMsg::Register {
            queue,
            device,
            hints,
            control,
        } => {
            controls.insert(queue, control);
            sched.handle_event(
                clock::now(),
                Event::Register {
                    queue,
                    device,
                    hints,
                },
            )
        }
        SchedMsg::Event(at, event) => {
            if let Event::Unregister(q) = event {
                controls.remove(&q);
            }
            sched.handle_event(at, event)
        }
        SchedMsg::SetPolicy(policy) => {
            sched.set_policy(policy);
            Ok(())
        }
        SchedMsg::Shutdown => {
            // Nobody will resume a queue after this: let every suspended one run.
            for q in sched.queues() {
                if sched.is_suspended(q.id) == Some(true)
                    && let Some(control) = controls.get(&q.id)
                {
                    control(Operation::Resume(q.id));
                }
            }
            return false;
        }
    };
    if let Err(e) = result {
        tracing::warn!("scheduler: {e}");
    }
    true
}
