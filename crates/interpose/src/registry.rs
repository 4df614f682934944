//! The process's interposer: one runtime and the application's intercepted queues.
//!
//! A preloaded library cannot be handed state by the program it is loaded into, so each shim
//! keeps one of these in a process-wide `OnceLock`, created on first use.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use xsched_runtime::{HwQueue, Runtime, XQueue, chain_text};

/// The runtime and the intercepted queues (`K`: how the shim names a real queue; its `Debug`
/// form names it in the log, e.g. `stream 0x1`).
pub struct Interposer<K, H: HwQueue> {
    library: &'static str,
    runtime: Runtime,
    queues: RwLock<HashMap<K, Arc<XQueue<H>>>>,
    /// Queues left unscheduled (each logged once).
    passed: Mutex<HashSet<K>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: Copy + Eq + Hash + std::fmt::Debug, H: HwQueue> Interposer<K, H> {
    /// The interposer of the `library` shim (`"OpenCL"`, `"CUDA"`), or `None` when `probe`
    /// (the real library's own check) or the `XSCHED_*` configuration fails: the shim is then
    /// disabled, says so once (the error with its causes), and forwards every call unchanged.
    pub fn start<E: std::error::Error>(
        library: &'static str,
        probe: impl FnOnce() -> Result<(), E>,
    ) -> Option<Interposer<K, H>> {
        xsched_runtime::init_logging(false);
        let disabled = |why: &dyn std::fmt::Display| {
            tracing::error!(
                "xsched {library} shim disabled, calls go straight to {library}: {why}"
            );
        };
        if let Err(e) = probe() {
            disabled(&chain_text(&e));
            return None;
        }
        match Runtime::from_env() {
            Ok(runtime) => {
                tracing::info!(
                    "xsched {library} shim: scheduler {}",
                    runtime.config().scheduler.name()
                );
                Some(Interposer {
                    library,
                    runtime,
                    queues: RwLock::default(),
                    passed: Mutex::default(),
                })
            }
            Err(e) => {
                disabled(&chain_text(&e));
                None
            }
        }
    }

    /// The scheduled queue behind `key`, if it is one.
    pub fn get(&self, key: K) -> Option<Arc<XQueue<H>>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()
    }

    /// Whether `key` was left unscheduled.
    pub fn passed(&self, key: K) -> bool {
        lock(&self.passed).contains(&key)
    }

    /// Put the real queue `key` under an XQueue made by `make` (from the runtime), or leave it
    /// unscheduled with one log line saying why (`make`'s error with its causes). Returns the
    /// XQueue, if any (an existing one for a key already scheduled).
    pub fn adopt<E: std::error::Error>(
        &self,
        key: K,
        make: impl FnOnce(&Runtime) -> Result<XQueue<H>, E>,
    ) -> Option<Arc<XQueue<H>>> {
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(q) = queues.get(&key) {
            return Some(q.clone());
        }
        match make(&self.runtime) {
            Ok(xqueue) => {
                tracing::info!(
                    "{} {key:?} scheduled as XQueue {} on device {} at priority {}",
                    self.library,
                    xqueue.id(),
                    xqueue.hw().device().0,
                    xqueue.hints().priority
                );
                let xqueue = Arc::new(xqueue);
                queues.insert(key, xqueue.clone());
                Some(xqueue)
            }
            Err(why) => {
                let why = chain_text(&why);
                tracing::warn!("{} {key:?} passed through unscheduled: {why}", self.library);
                lock(&self.passed).insert(key);
                None
            }
        }
    }

    /// Leave `key` unscheduled (logged once by the caller).
    pub fn pass(&self, key: K) {
        lock(&self.passed).insert(key);
    }

    /// Forget every queue whose key satisfies `pred` (a thread's or a context's queues that went
    /// away with it); dropping the returned XQueues drains them.
    pub fn forget_where(&self, pred: impl Fn(&K) -> bool) -> Vec<Arc<XQueue<H>>> {
        lock(&self.passed).retain(|k| !pred(k));
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        let keys: Vec<K> = queues.keys().filter(|k| pred(k)).copied().collect();
        keys.iter().filter_map(|k| queues.remove(k)).collect()
    }

    /// The application is done with the real queue `key`: forget it. Dropping the returned
    /// XQueue (the last reference) drains it, so every command the application issued runs.
    pub fn forget(&self, key: K) -> Option<Arc<XQueue<H>>> {
        lock(&self.passed).remove(&key);
        self.queues
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
    }
}
