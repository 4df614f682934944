//! State one XQueue shares between the application's threads, its launcher thread and the
//! backend's completion callbacks.
//!
//! The hot path is lock-free: a completion stores one atomic watermark and, only for a
//! synchronization point (or while someone waits), sends the launcher one message. The mutex
//! guards what waiters read (the observed-completion watermark, failures, cancellations) and is
//! taken once per synchronization point, or on a failure.

use crate::completion::CompletionSink;
use crate::error::CommandError;
use crate::launcher::Msg;
use crossbeam_channel::Sender;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use xsched_core::{CommandId, Level};

#[derive(Default)]
struct Observed {
    /// Every command below this id was observed complete by the launcher.
    upto: u64,
    failed: HashMap<u64, CommandError>,
    cancelled: Vec<Range<u64>>,
    closed: bool,
}

impl Observed {
    fn settled(&self, id: u64) -> bool {
        id < self.upto || self.cancelled.iter().any(|r| r.contains(&id))
    }

    fn outcome(&self, id: u64) -> Result<(), CommandError> {
        if self.cancelled.iter().any(|r| r.contains(&id)) {
            return Err(CommandError::Cancelled);
        }
        match self.failed.get(&id) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// What everybody may read about a queue, and how waiters are woken.
pub(crate) struct Tracker {
    /// Every command below this id finished on the hardware (reported by the backend).
    hw_done: AtomicU64,
    /// While non-zero, every hardware completion is reported to the launcher, not only sync points.
    watchers: AtomicU32,
    /// A Ready was reported to the scheduler since the last Idle (by the application thread or
    /// the launcher), so the other need not wake the scheduler again.
    ready_reported: AtomicBool,
    pending: AtomicUsize,
    in_flight: AtomicUsize,
    suspended: AtomicBool,
    level: AtomicU8,
    /// P99 of submit → completion over the last stats period, in nanoseconds.
    recent_p99: AtomicU64,
    observed: Mutex<Observed>,
    cond: Condvar,
}

impl Tracker {
    pub(crate) fn new(level: Level) -> Tracker {
        Tracker {
            hw_done: AtomicU64::new(0),
            watchers: AtomicU32::new(0),
            ready_reported: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            suspended: AtomicBool::new(false),
            level: AtomicU8::new(level.number()),
            recent_p99: AtomicU64::new(0),
            observed: Mutex::new(Observed::default()),
            cond: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Observed> {
        // A poisoned lock only means a panicking thread held it; the data stays consistent
        // because every critical section is a few plain stores.
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn hw_done(&self) -> u64 {
        self.hw_done.load(Ordering::SeqCst)
    }

    pub(crate) fn watch(&self) {
        self.watchers.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn unwatch(&self) {
        self.watchers.fetch_sub(1, Ordering::SeqCst);
    }

    fn watched(&self) -> bool {
        self.watchers.load(Ordering::SeqCst) > 0
    }

    fn record_hw_completion(&self, cmd: CommandId, result: Result<(), CommandError>) {
        if let Err(e) = result {
            self.lock().failed.insert(cmd.0, e);
        }
        self.hw_done.fetch_max(cmd.0 + 1, Ordering::SeqCst);
    }

    /// The launcher observed every command below `upto` complete.
    pub(crate) fn publish_done(&self, upto: u64) {
        let mut o = self.lock();
        o.upto = o.upto.max(upto);
        drop(o);
        if self.watched() {
            self.cond.notify_all();
        }
    }

    /// Commands in `range` were cancelled before launch.
    pub(crate) fn publish_cancelled(&self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        self.lock().cancelled.push(range);
        self.cond.notify_all();
    }

    /// The launcher is gone: nothing more will be observed.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.cond.notify_all();
    }

    pub(crate) fn publish_state(
        &self,
        pending: usize,
        in_flight: usize,
        suspended: bool,
        level: Level,
    ) {
        self.pending.store(pending, Ordering::Relaxed);
        self.in_flight.store(in_flight, Ordering::Relaxed);
        self.suspended.store(suspended, Ordering::Relaxed);
        self.level.store(level.number(), Ordering::Relaxed);
    }

    pub(crate) fn publish_recent_p99(&self, ns: u64) {
        self.recent_p99.store(ns, Ordering::Relaxed);
    }

    /// What `xsched top` shows of this queue.
    pub(crate) fn stats(&self) -> xsched_proto::QueueStats {
        xsched_proto::QueueStats {
            in_flight: self.in_flight.load(Ordering::Relaxed) as u64,
            completed: self.lock().upto,
            recent_p99_us: self.recent_p99.load(Ordering::Relaxed) as f64 / 1e3,
        }
    }

    /// True for exactly one caller between two Idle reports: that caller sends Ready.
    pub(crate) fn claim_ready_report(&self) -> bool {
        !self.ready_reported.swap(true, Ordering::SeqCst)
    }

    /// The queue was reported idle; the next Ready must be sent again.
    pub(crate) fn reset_ready_report(&self) {
        self.ready_reported.store(false, Ordering::SeqCst);
    }

    /// The level the launcher last published.
    pub(crate) fn level(&self) -> Level {
        Level::try_from(self.level.load(Ordering::Relaxed)).unwrap_or(Level::Block)
    }

    /// Whether the launcher last published an idle queue (may be stale either way).
    pub(crate) fn looks_idle(&self) -> bool {
        self.pending.load(Ordering::Relaxed) == 0 && self.in_flight.load(Ordering::Relaxed) == 0
    }

    pub(crate) fn state(&self) -> (usize, usize, bool, Level, u64) {
        let level = self.level();
        (
            self.pending.load(Ordering::Relaxed),
            self.in_flight.load(Ordering::Relaxed),
            self.suspended.load(Ordering::Relaxed),
            level,
            self.lock().upto,
        )
    }

    pub(crate) fn is_settled(&self, id: u64) -> bool {
        self.lock().settled(id)
    }

    /// Block until command `id` is observed complete (or cancelled), or until `deadline`
    /// (`None`: no deadline; then the answer is always `Some`); `observe` asks the launcher to
    /// look at the hardware watermark once, for a command that finished before we watched.
    pub(crate) fn wait(
        &self,
        id: u64,
        observe: &dyn Fn(),
        deadline: Option<std::time::Instant>,
    ) -> Option<Result<(), CommandError>> {
        if let Some(done) = self.outcome_if_settled(id) {
            return Some(done);
        }
        self.watch();
        observe();
        let mut o = self.lock();
        while !o.settled(id) && !o.closed {
            o = match deadline {
                None => self
                    .cond
                    .wait(o)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    self.cond
                        .wait_timeout(o, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
            };
        }
        let result = if o.settled(id) {
            Some(o.outcome(id))
        } else if o.closed {
            Some(Err(CommandError::Lost))
        } else {
            None
        };
        drop(o);
        self.unwatch();
        result
    }

    /// The failure of the lowest-numbered failed command below `upto`, if any.
    pub(crate) fn first_failure(&self, upto: u64) -> Result<(), CommandError> {
        let o = self.lock();
        match o
            .failed
            .iter()
            .filter(|(id, _)| **id < upto)
            .min_by_key(|(id, _)| **id)
        {
            Some((_, e)) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn outcome_if_settled(&self, id: u64) -> Option<Result<(), CommandError>> {
        let o = self.lock();
        o.settled(id).then(|| o.outcome(id))
    }
}

/// The completion sink of one XQueue: records, and wakes the launcher when it must look.
pub(crate) struct QueueSink<C> {
    pub(crate) tracker: std::sync::Arc<Tracker>,
    pub(crate) launcher: Sender<Msg<C>>,
}

impl<C: Send> CompletionSink for QueueSink<C> {
    fn complete(&self, cmd: CommandId, sync: bool, result: Result<(), CommandError>) {
        self.tracker.record_hw_completion(cmd, result);
        if sync || self.tracker.watched() {
            // The launcher may be gone when a queue is torn down; nothing waits then.
            let _ = self.launcher.send(Msg::Synced(cmd));
        }
    }
}
