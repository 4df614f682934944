//! One hardware queue of the device: its launches into the shared FIFO (blocking while it is
//! full), its gate (deactivate, interrupt, restore) and its synchronization, and its leaving.

use super::state::{FifoEntry, Inner, WORKER_OF};
use crate::kernel::CpuCommand;
use std::sync::Arc;
use xsched_core::{Capabilities, DeviceId};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue};

/// One hardware queue of a [`CpuDevice`](super::CpuDevice); commands run and complete in launch
/// order.
///
/// Completions are reported from a worker while it holds the device lock: a
/// [`CompletionSink`](xsched_runtime::CompletionSink) must not call back into the device. The
/// queue's [`CompletionHook`] runs on that worker right after, out of the lock, so an XQueue
/// refills from the completing thread.
pub struct CpuQueue {
    pub(super) inner: Arc<Inner>,
    pub(super) queue: u32,
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
        st.fifo.push_back(FifoEntry {
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
