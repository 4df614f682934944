//! The device's worker threads: each claims a tile under the device lock, runs it outside the
//! lock (a panic fails its command, not the worker), and reports what ended, then runs the
//! completion hook a finished command left due.

use super::state::{Inner, WORKER_OF, WorkItem};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

impl Inner {
    pub(super) fn worker(&self) {
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
                WorkItem::Tile(k, t) => k.run_tile(t),
                WorkItem::Host(f) => f(),
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
}

/// Restrict the calling thread to one core (best effort: a refusal is logged, not fatal).
pub(super) fn pin_current_thread(core: usize) {
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
