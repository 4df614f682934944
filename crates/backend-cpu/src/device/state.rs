//! The device's shared state, one mutex around it: the hardware FIFO, the per-queue gates, the
//! running command, and the picking of the next tile and recording of its end, which the
//! device, its queues and its workers all work through.

use crate::kernel::{CpuCommand, Kernel};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use xsched_core::{Capabilities, DeviceId};
use xsched_runtime::{CommandError, Completion, CompletionHook};

/// Hardware FIFO entries a device holds before `launch` blocks (like a GPU ring buffer).
pub const DEFAULT_FIFO_CAPACITY: usize = 1024;

enum Work {
    Kernel(Arc<dyn Kernel>),
    Host(Option<Box<dyn FnOnce() + Send>>),
}

pub(super) struct FifoEntry {
    pub(super) queue: u32,
    pub(super) seq: u64,
    pub(super) cmd: CpuCommand,
    pub(super) done: Completion,
}

/// The command on the device (or one saved by an interrupt).
pub(super) struct Running {
    pub(super) queue: u32,
    seq: u64,
    work: Work,
    name: &'static str,
    pub(super) done: Completion,
    pub(super) tiles: u32,
    pub(super) next_tile: u32,
    busy: u32,
    /// Worker time spent in the command's tiles so far (its measured device time).
    ran: Duration,
    stop: bool,
    failed: Option<String>,
}

impl Running {
    fn new(e: FifoEntry) -> Running {
        let (work, tiles, name) = match e.cmd {
            CpuCommand::Kernel(k) => {
                let tiles = k.tiles().max(1);
                let name = k.name();
                (Work::Kernel(k), tiles, name)
            }
            CpuCommand::Host(f) => (Work::Host(Some(f)), 1, "host callback"),
        };
        Running {
            queue: e.queue,
            seq: e.seq,
            work,
            name,
            done: e.done,
            tiles,
            next_tile: 0,
            busy: 0,
            ran: Duration::ZERO,
            stop: false,
            failed: None,
        }
    }
}

pub(super) struct QueueGate {
    pub(super) active: bool,
    pub(super) queued: usize,
    pub(super) saved: Option<Running>,
    /// The `CpuQueue` was dropped with work left: forget the gate once that work is done.
    pub(super) closed: bool,
    /// Deferred completion work of the queue (its XQueue's refill), run by the worker that
    /// completed a command of the queue, after it left the device lock.
    pub(super) hook: Option<Arc<CompletionHook>>,
}

impl Default for QueueGate {
    fn default() -> Self {
        QueueGate {
            active: true,
            queued: 0,
            saved: None,
            closed: false,
            hook: None,
        }
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) fifo: VecDeque<FifoEntry>,
    pub(super) gates: HashMap<u32, QueueGate>,
    pub(super) running: Option<Running>,
    pub(super) next_seq: u64,
    pub(super) next_queue: u32,
    pub(super) shutdown: bool,
    /// Workers asleep on `work`, and threads asleep on `changed`: notifications (system calls)
    /// are made only when somebody sleeps, so the busy path makes none.
    pub(super) idle_workers: usize,
    pub(super) changed_waiters: usize,
}

pub(super) enum WorkItem {
    Tile(Arc<dyn Kernel>, u32),
    Host(Box<dyn FnOnce() + Send>),
}

impl State {
    /// A tile to run, starting the next command if the device is free.
    pub(super) fn claim(&mut self) -> Option<WorkItem> {
        if self.running.is_none() {
            self.running = self.start_next();
        }
        let r = self.running.as_mut()?;
        if r.stop || r.failed.is_some() || r.next_tile >= r.tiles {
            return None;
        }
        let job = match &mut r.work {
            Work::Kernel(k) => WorkItem::Tile(k.clone(), r.next_tile),
            Work::Host(f) => WorkItem::Host(f.take()?),
        };
        r.next_tile += 1;
        r.busy += 1;
        Some(job)
    }

    /// The oldest runnable command: a saved (interrupted) one of an active queue, or the first
    /// FIFO entry of an active queue.
    fn start_next(&mut self) -> Option<Running> {
        let saved = self
            .gates
            .iter()
            .filter(|(_, g)| g.active)
            .filter_map(|(&q, g)| g.saved.as_ref().map(|r| (r.seq, q)))
            .min();
        let queued = self
            .fifo
            .iter()
            .position(|e| self.gates.get(&e.queue).is_none_or(|g| g.active));
        let queued_seq = queued.and_then(|i| self.fifo.get(i)).map(|e| e.seq);
        match (saved, queued_seq) {
            (Some((seq, q)), other) if other.is_none_or(|s| seq < s) => {
                self.gates.get_mut(&q).and_then(|g| g.saved.take())
            }
            _ => {
                let entry = self.fifo.remove(queued?)?;
                if let Some(g) = self.gates.get_mut(&entry.queue) {
                    g.queued -= 1;
                }
                Some(Running::new(entry))
            }
        }
    }

    /// A worker finished a tile. Returns the completion to report when the command ended.
    pub(super) fn finish_tile(
        &mut self,
        ran: Duration,
        panic: Option<String>,
    ) -> Option<(u32, Completion, Result<(), CommandError>)> {
        let r = self.running.as_mut()?;
        r.busy -= 1;
        r.ran += ran;
        if let Some(msg) = panic {
            r.failed.get_or_insert(msg);
        }
        if r.busy > 0 {
            return None;
        }
        if let Some(msg) = r.failed.take() {
            let name = r.name;
            let r = self.running.take()?;
            self.forget_if_done(r.queue);
            r.done.report_device_time(r.ran);
            return Some((
                r.queue,
                r.done,
                Err(CommandError::Failed(format!("{name} panicked: {msg}"))),
            ));
        }
        if r.next_tile >= r.tiles {
            let r = self.running.take()?;
            self.forget_if_done(r.queue);
            r.done.report_device_time(r.ran);
            return Some((r.queue, r.done, Ok(())));
        }
        if r.stop {
            let mut r = self.running.take()?;
            r.stop = false;
            let queue = r.queue;
            self.gates.entry(queue).or_default().saved = Some(r);
        }
        None
    }

    /// Drop the gate of a closed queue whose last command just ended.
    fn forget_if_done(&mut self, queue: u32) {
        if self.gates.get(&queue).is_some_and(|g| g.closed) && !self.has_work(queue) {
            self.gates.remove(&queue);
        }
    }

    pub(super) fn has_work(&self, queue: u32) -> bool {
        let g = self.gates.get(&queue);
        g.is_some_and(|g| g.queued > 0 || g.saved.is_some())
            || self.running.as_ref().is_some_and(|r| r.queue == queue)
    }
}

pub(super) struct Inner {
    pub(super) id: DeviceId,
    pub(super) capacity: usize,
    pub(super) caps: Capabilities,
    pub(super) state: Mutex<State>,
    /// Workers wait here for work.
    pub(super) work: Condvar,
    /// Launchers (for FIFO room) and `synchronize` wait here.
    pub(super) changed: Condvar,
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Tiles run outside the lock, so a poisoned lock means a bug in this module's short
        // critical sections; the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn set_active(&self, queue: u32, active: bool, stop_running: bool) {
        let mut st = self.lock();
        st.gates.entry(queue).or_default().active = active;
        if stop_running && let Some(r) = st.running.as_mut().filter(|r| r.queue == queue) {
            r.stop = true;
        }
        drop(st);
        if active {
            self.work.notify_all();
        }
    }
}

thread_local! {
    /// The device whose worker this thread is, if any: a worker that launches (its completion
    /// hook refilling a queue) must not wait for FIFO room only workers make.
    pub(super) static WORKER_OF: Cell<Option<DeviceId>> = const { Cell::new(None) };
}
