//! The device a program holds: starting its workers (pinned to cores or not), its capability
//! table and queries, its queues, and shutting it down, which fails what it still held.

use super::queue::CpuQueue;
use super::state::{DEFAULT_FIFO_CAPACITY, Inner, QueueGate, State};
use super::worker::pin_current_thread;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use xsched_core::{Capabilities, DeviceId, Level};
use xsched_runtime::{CommandError, Completion};

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
