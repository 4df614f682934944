//! The CPU device: worker threads, one bounded hardware FIFO, and per-queue gates.
//!
//! One mutex guards the device state (FIFO, per-queue gates, the running command); it is held
//! only to pick work and record its end, never while a tile runs. Workers sleep on a condition
//! variable when there is nothing to run.

use crate::kernel::{CpuCommand, Kernel};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xsched_core::{Capabilities, DeviceId, Level};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue};

/// Hardware FIFO entries a device holds before `launch` blocks (like a GPU ring buffer).
pub const DEFAULT_FIFO_CAPACITY: usize = 1024;

enum Work {
    Kernel(Arc<dyn Kernel>),
    Host(Option<Box<dyn FnOnce() + Send>>),
}

struct Entry {
    queue: u32,
    seq: u64,
    cmd: CpuCommand,
    done: Completion,
}

/// The command on the device (or one saved by an interrupt).
struct Running {
    queue: u32,
    seq: u64,
    work: Work,
    name: &'static str,
    done: Completion,
    tiles: u32,
    next_tile: u32,
    busy: u32,
    /// Worker time spent in the command's tiles so far (its measured device time).
    ran: Duration,
    stop: bool,
    failed: Option<String>,
}

impl Running {
    fn new(e: Entry) -> Running {
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

struct QueueGate {
    active: bool,
    queued: usize,
    saved: Option<Running>,
    /// The `CpuQueue` was dropped with work left: forget the gate once that work is done.
    closed: bool,
    /// Deferred completion work of the queue (its XQueue's refill), run by the worker that
    /// completed a command of the queue, after it left the device lock.
    hook: Option<Arc<CompletionHook>>,
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
struct State {
    fifo: VecDeque<Entry>,
    gates: HashMap<u32, QueueGate>,
    running: Option<Running>,
    next_seq: u64,
    next_queue: u32,
    shutdown: bool,
    /// Workers asleep on `work`, and threads asleep on `changed`: notifications (system calls)
    /// are made only when somebody sleeps, so the busy path makes none.
    idle_workers: usize,
    changed_waiters: usize,
}

enum Job {
    Tile(Arc<dyn Kernel>, u32),
    Host(Box<dyn FnOnce() + Send>),
}

impl State {
    /// A tile to run, starting the next command if the device is free.
    fn claim(&mut self) -> Option<Job> {
        if self.running.is_none() {
            self.running = self.start_next();
        }
        let r = self.running.as_mut()?;
        if r.stop || r.failed.is_some() || r.next_tile >= r.tiles {
            return None;
        }
        let job = match &mut r.work {
            Work::Kernel(k) => Job::Tile(k.clone(), r.next_tile),
            Work::Host(f) => Job::Host(f.take()?),
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
    fn finish_tile(
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

    fn has_work(&self, queue: u32) -> bool {
        let g = self.gates.get(&queue);
        g.is_some_and(|g| g.queued > 0 || g.saved.is_some())
            || self.running.as_ref().is_some_and(|r| r.queue == queue)
    }
}

struct Inner {
    id: DeviceId,
    capacity: usize,
    caps: Capabilities,
    state: Mutex<State>,
    /// Workers wait here for work.
    work: Condvar,
    /// Launchers (for FIFO room) and `synchronize` wait here.
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Tiles run outside the lock, so a poisoned lock means a bug in this file's short
        // critical sections; the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn worker(&self) {
        WORKER_OF.set(Some(self.id));
        let mut st = self.lock();
        loop {
            if st.shutdown {
                return;
            }
            let Some(job) = st.claim() else {
                st.idle_workers += 1;
                st = self
                    .work
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                st.idle_workers -= 1;
                continue;
            };
            if st.idle_workers > 0 && st.running.as_ref().is_some_and(|r| r.next_tile < r.tiles) {
                // More tiles to share: wake idle workers.
                self.work.notify_all();
            }
            drop(st);
            let started = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| match job {
                Job::Tile(k, t) => k.run_tile(t),
                Job::Host(f) => f(),
            }));
            let ran = started.elapsed();
            // The device shares the machine's cores with the host's threads (the launchers, the
            // scheduler, the application). Offering the core at every checkpoint bounds how long
            // a woken host thread waits behind a spinning kernel to one tile, instead of an OS
            // time slice (milliseconds).
            std::thread::yield_now();
            st = self.lock();
            let ended = st.finish_tile(ran, outcome.err().map(|p| panic_message(&*p)));
            if st.running.is_none() {
                if st.changed_waiters > 0 {
                    self.changed.notify_all();
                }
                if st.idle_workers > 0 {
                    self.work.notify_all();
                }
            }
            if let Some((queue, done, result)) = ended {
                // Reported under the lock so completions stay in launch order and
                // `synchronize` never returns before the last one is reported.
                done.complete(result);
                // What the completion left to do on this thread (an XQueue's refill after a
                // synchronization point), out of the device lock: it launches.
                let due = st
                    .gates
                    .get(&queue)
                    .and_then(|g| g.hook.as_ref())
                    .filter(|h| h.is_due())
                    .cloned();
                if let Some(hook) = due {
                    drop(st);
                    hook.run();
                    drop(hook);
                    st = self.lock();
                }
            }
        }
    }

    fn set_active(&self, queue: u32, active: bool, stop_running: bool) {
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
    static WORKER_OF: Cell<Option<DeviceId>> = const { Cell::new(None) };
}

/// Restrict the calling thread to one core (best effort: a refusal is logged, not fatal).
fn pin_current_thread(core: usize) {
    let mut set = nix::sched::CpuSet::new();
    let result = set
        .set(core)
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set));
    if let Err(e) = result {
        tracing::warn!("cannot pin a CPU-device worker to core {core}: {e}");
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

/// A CPU device: N worker threads behind one hardware FIFO.
pub struct CpuDevice {
    inner: Arc<Inner>,
    workers: Vec<JoinHandle<()>>,
}

impl CpuDevice {
    /// A device with `workers` threads (at least one) and the default FIFO capacity.
    pub fn new(workers: usize) -> std::io::Result<CpuDevice> {
        CpuDevice::with_capacity(workers, DEFAULT_FIFO_CAPACITY)
    }

    /// A device with `workers` threads and room for `capacity` commands in its FIFO.
    pub fn with_capacity(workers: usize, capacity: usize) -> std::io::Result<CpuDevice> {
        CpuDevice::build(workers, capacity, None)
    }

    /// A device whose worker `i` runs only on core `first_core + i`. Devices of several
    /// processes pinned to the same cores share them the way GPU contexts share a GPU: the OS
    /// time-slices their kernels (the native behaviour that cross-process scheduling improves on).
    pub fn pinned(workers: usize, first_core: usize) -> std::io::Result<CpuDevice> {
        CpuDevice::build(workers, DEFAULT_FIFO_CAPACITY, Some(first_core))
    }

    fn build(
        workers: usize,
        capacity: usize,
        first_core: Option<usize>,
    ) -> std::io::Result<CpuDevice> {
        static NEXT_ID: AtomicU16 = AtomicU16::new(0);
        let inner = Arc::new(Inner {
            id: DeviceId(NEXT_ID.fetch_add(1, Ordering::Relaxed)),
            capacity: capacity.max(1),
            caps: CpuDevice::capabilities(),
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            changed: Condvar::new(),
        });
        let mut device = CpuDevice {
            inner,
            workers: Vec::new(),
        };
        for i in 0..workers.max(1) {
            let inner = device.inner.clone();
            let core = first_core.map(|c| c + i);
            device.workers.push(
                std::thread::Builder::new()
                    .name(format!("xsched-cpu{}-w{i}", device.inner.id.0))
                    .spawn(move || {
                        if let Some(core) = core {
                            pin_current_thread(core);
                        }
                        inner.worker();
                    })?,
            );
        }
        Ok(device)
    }

    /// The CPU backend's capability table.
    pub fn capabilities() -> Capabilities {
        Capabilities {
            max_level: Level::Interrupt,
            native_arbitration: "fifo: one hardware FIFO in launch order across queues".into(),
            preemption_unit: "tile checkpoint".into(),
            keeps_state: true,
            hardware_priority: false,
        }
    }

    /// This device's id.
    pub fn id(&self) -> DeviceId {
        self.inner.id
    }

    /// Hardware queues the device currently tracks (dropped queues leave once their work ends).
    pub fn queues(&self) -> usize {
        self.inner.lock().gates.len()
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// A new hardware queue on this device.
    pub fn create_queue(&self) -> CpuQueue {
        let mut st = self.inner.lock();
        let queue = st.next_queue;
        st.next_queue += 1;
        st.gates.insert(queue, QueueGate::default());
        CpuQueue {
            inner: self.inner.clone(),
            queue,
        }
    }
}

impl Drop for CpuDevice {
    fn drop(&mut self) {
        let (hooks, leftovers): (Vec<_>, Vec<Completion>) = {
            let mut st = self.inner.lock();
            st.shutdown = true;
            // No worker runs completion hooks any more: hand their work back to the queues'
            // launchers before reporting the leftovers from this thread.
            let hooks = st
                .gates
                .values_mut()
                .filter_map(|g| g.hook.take())
                .collect();
            let mut left: Vec<Completion> = st.fifo.drain(..).map(|e| e.done).collect();
            left.extend(st.running.take().map(|r| r.done));
            left.extend(
                st.gates
                    .values_mut()
                    .filter_map(|g| g.saved.take())
                    .map(|r| r.done),
            );
            (hooks, left)
        };
        self.inner.work.notify_all();
        self.inner.changed.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        drop(hooks);
        for done in leftovers {
            done.complete(Err(CommandError::Failed("the device was shut down".into())));
        }
    }
}

impl std::fmt::Debug for CpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuDevice")
            .field("id", &self.inner.id)
            .field("workers", &self.workers.len())
            .finish()
    }
}

/// One hardware queue of a [`CpuDevice`]; commands run and complete in launch order.
///
/// Completions are reported from a worker while it holds the device lock: a
/// [`CompletionSink`](xsched_runtime::CompletionSink) must not call back into the device. The
/// queue's [`CompletionHook`] runs on that worker right after, out of the lock, so an XQueue
/// refills from the completing thread.
pub struct CpuQueue {
    inner: Arc<Inner>,
    queue: u32,
}

impl HwQueue for CpuQueue {
    type Command = CpuCommand;

    fn capabilities(&self) -> &Capabilities {
        &self.inner.caps
    }

    fn device(&self) -> DeviceId {
        self.inner.id
    }

    /// Blocks while the device FIFO is full (except on one of the device's own workers, whose
    /// completion hook launches: it would wait for itself).
    fn launch(&self, cmd: CpuCommand, done: Completion) {
        let worker = WORKER_OF.get() == Some(self.inner.id);
        let mut st = self.inner.lock();
        while st.fifo.len() >= self.inner.capacity && !st.shutdown && !worker {
            st.changed_waiters += 1;
            st = self
                .inner
                .changed
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.changed_waiters -= 1;
        }
        if st.shutdown {
            drop(st);
            done.complete(Err(CommandError::Failed("the device was shut down".into())));
            return;
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.gates.entry(self.queue).or_default().queued += 1;
        st.fifo.push_back(Entry {
            queue: self.queue,
            seq,
            cmd,
            done,
        });
        let idle = st.idle_workers > 0;
        drop(st);
        if idle {
            self.inner.work.notify_one();
        }
    }

    fn synchronize(&self) -> Result<(), HwError> {
        let mut st = self.inner.lock();
        while st.has_work(self.queue) {
            if st.shutdown {
                return Err(HwError::DeviceGone);
            }
            if st.gates.get(&self.queue).is_some_and(|g| !g.active)
                && st.running.as_ref().is_none_or(|r| r.queue != self.queue)
            {
                return Err(HwError::Backend(
                    "the queue is deactivated with commands held; reactivate it first".into(),
                ));
            }
            st.changed_waiters += 1;
            st = self
                .inner
                .changed
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.changed_waiters -= 1;
        }
        Ok(())
    }

    /// The worker that completes one of the queue's commands runs the hook when it is due,
    /// after it reported the completion and left the device lock.
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        let mut st = self.inner.lock();
        if st.shutdown {
            return Err(HwError::DeviceGone);
        }
        st.gates.entry(self.queue).or_default().hook = Some(Arc::new(hook));
        Ok(())
    }

    fn deactivate(&self) -> Result<(), HwError> {
        self.inner.set_active(self.queue, false, false);
        Ok(())
    }

    fn reactivate(&self) -> Result<(), HwError> {
        self.inner.set_active(self.queue, true, false);
        Ok(())
    }

    fn interrupt(&self) -> Result<(), HwError> {
        self.inner.set_active(self.queue, false, true);
        Ok(())
    }

    fn restore(&self) -> Result<(), HwError> {
        self.inner.set_active(self.queue, true, false);
        Ok(())
    }
}

impl Drop for CpuQueue {
    /// The queue's gate leaves the device now, or, if commands of it are still held or
    /// running, is opened (nothing would reactivate it any more) and leaves after them.
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        if st.has_work(self.queue) {
            if let Some(g) = st.gates.get_mut(&self.queue) {
                g.active = true;
                g.closed = true;
            }
            drop(st);
            self.inner.work.notify_all();
        } else {
            st.gates.remove(&self.queue);
        }
    }
}

impl std::fmt::Debug for CpuQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuQueue")
            .field("device", &self.inner.id)
            .field("queue", &self.queue)
            .finish()
    }
}
