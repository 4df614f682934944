//! State one XQueue shares between the application's threads, its launcher thread and the
//! backend's completion callbacks.
//!
//! The hot path is lock-free: a completion stores one atomic watermark and, only for a
//! synchronization point or the command somebody waits for, sends the launcher one message (a
//! synchronization point nobody waits for goes to the queue's completion hook instead, where
//! the backend runs one: see `refill.rs`). The
//! mutex guards what waiters read (the observed-completion watermark, failures, cancellations,
//! who waits for what) and is taken once per synchronization point, or on a failure.
//!
//! A waiter registers the command it waits for, so completions before it cost nobody a wake-up
//! (neither the launcher nor the waiter): only the completion of the lowest command anybody
//! waits for is reported early.

use crate::error::CommandError;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use xsched_core::{CommandId, Level};

#[derive(Default)]
struct Observed {
    /// Every command below this id was observed complete by the launcher.
    upto: u64,
    failed: HashMap<u64, CommandError>,
    cancelled: Vec<Range<u64>>,
    closed: bool,
    /// The commands waited for, with how many wait for each.
    waiting: BTreeMap<u64, u32>,
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
    /// The lowest command anybody waits for (`u64::MAX`: nobody): its completion, and any
    /// later one, is reported to the launcher even if it is no sync point.
    wanted: AtomicU64,
    /// A Ready was reported to the scheduler since the last Idle (by the application thread or
    /// the launcher), so the other need not wake the scheduler again.
    ready_reported: AtomicBool,
    pending: AtomicUsize,
    in_flight: AtomicUsize,
    suspended: AtomicBool,
    level: AtomicU8,
    /// P99 of submit → completion over the last stats period, in nanoseconds.
    recent_p99: AtomicU64,
    /// The launcher is gone (read without the lock on every submit).
    closed: AtomicBool,
    /// Commands launched so far (the newest launched is `launched - 1`).
    launched: AtomicU64,
    /// The launch config's batch, for spacing the tails that are observed.
    batch: AtomicU64,
    /// The command whose completion frees half of a binding in-flight budget (`u64::MAX`:
    /// none): reported once, so the launcher refills before the device drains.
    refill_at: AtomicU64,
    /// Device time the backend reported for completed commands (ns).
    device_ns: AtomicU64,
    /// Whether the backend reports device time at all.
    device_reported: AtomicBool,
    /// Submitters waiting for room under a pending bound (`XQueue` with `max_pending`).
    room_waiters: AtomicUsize,
    observed: Mutex<Observed>,
    cond: Condvar,
    /// Wakes the submitters waiting for room (a launch lowered `pending`, or the queue closed).
    room: Condvar,
}

impl Tracker {
    pub(crate) fn new(level: Level) -> Tracker {
        Tracker {
            hw_done: AtomicU64::new(0),
            wanted: AtomicU64::new(u64::MAX),
            refill_at: AtomicU64::new(u64::MAX),
            ready_reported: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            suspended: AtomicBool::new(false),
            level: AtomicU8::new(level.number()),
            recent_p99: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            launched: AtomicU64::new(0),
            batch: AtomicU64::new(1),
            device_ns: AtomicU64::new(0),
            device_reported: AtomicBool::new(false),
            room_waiters: AtomicUsize::new(0),
            observed: Mutex::new(Observed::default()),
            cond: Condvar::new(),
            room: Condvar::new(),
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

    fn store_wanted(&self, o: &Observed) {
        let lowest = o.waiting.keys().next().copied().unwrap_or(u64::MAX);
        self.wanted.store(lowest, Ordering::SeqCst);
    }

    /// Somebody waits for command `id`: report its completion (and later ones) early.
    fn want(&self, id: u64) {
        let mut o = self.lock();
        *o.waiting.entry(id).or_insert(0) += 1;
        self.store_wanted(&o);
    }

    fn unwant(&self, id: u64) {
        let mut o = self.lock();
        if let Some(n) = o.waiting.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                o.waiting.remove(&id);
            }
        }
        self.store_wanted(&o);
    }

    /// The launcher must see every completion from now on (after a cancel, while closing).
    pub(crate) fn watch(&self) {
        self.want(0);
    }

    pub(crate) fn unwatch(&self) {
        self.unwant(0);
    }

    /// Whether the completion of `cmd` must be reported even if it is no sync point.
    pub(crate) fn wanted(&self, cmd: CommandId) -> bool {
        cmd.0 >= self.wanted.load(Ordering::SeqCst)
    }

    pub(crate) fn record_hw_completion(&self, cmd: CommandId, result: Result<(), CommandError>) {
        if let Err(e) = result {
            self.lock().failed.insert(cmd.0, e);
        }
        self.hw_done.fetch_max(cmd.0 + 1, Ordering::SeqCst);
    }

    /// The launcher observed every command below `upto` complete.
    pub(crate) fn publish_done(&self, upto: u64) {
        let mut o = self.lock();
        o.upto = o.upto.max(upto);
        let wake = o.waiting.keys().next().is_some_and(|&lowest| lowest < upto);
        drop(o);
        if wake {
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
        self.closed.store(true, Ordering::SeqCst);
        self.lock().closed = true;
        self.cond.notify_all();
        self.room.notify_all();
    }

    /// Command `cmd` is being launched (before the backend sees it).
    pub(crate) fn launching(&self, cmd: CommandId) {
        self.launched.fetch_max(cmd.0 + 1, Ordering::SeqCst);
    }

    /// Report the completion of `cmd` (if any) once, as the point to refill from.
    pub(crate) fn refill_at(&self, cmd: Option<CommandId>) {
        self.refill_at
            .store(cmd.map_or(u64::MAX, |c| c.0), Ordering::Release);
    }

    /// Whether `cmd` is the refill point (claimed: reported once). A plain load first, so the
    /// completions that are not it (nearly all) cost no read-modify-write.
    pub(crate) fn refill_due(&self, cmd: CommandId) -> bool {
        self.refill_at.load(Ordering::Acquire) == cmd.0
            && self
                .refill_at
                .compare_exchange(cmd.0, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// The launch config's batch changed.
    pub(crate) fn publish_batch(&self, batch: u32) {
        self.batch.store(u64::from(batch.max(1)), Ordering::Relaxed);
    }

    /// Whether the completion of the tail `cmd` (a synchronization point only because nothing
    /// else was pending when it launched) must be observed: when it is still the newest
    /// launched command (nothing else covers it), or when commands wait for room and it ends a
    /// batch (so room is made a batch at a time, as batch points would). A later launched
    /// command always carries a synchronization point of its own that covers it.
    pub(crate) fn tail_needed(&self, cmd: CommandId) -> bool {
        cmd.0 + 1 >= self.launched.load(Ordering::SeqCst)
            || (self.pending.load(Ordering::Relaxed) > 0
                && (cmd.0 + 1).checked_rem(self.batch.load(Ordering::Relaxed)) == Some(0))
    }

    /// Commands submitted and not launched, as last published.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Block until fewer than `max` commands are pending, or the queue closed.
    pub(crate) fn wait_for_room(&self, max: usize) {
        if self.pending() < max {
            return;
        }
        let mut o = self.lock();
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        while self.pending() >= max && !o.closed {
            o = self
                .room
                .wait(o)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the launcher is gone (a submit would never be observed).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn publish_state(
        &self,
        pending: usize,
        in_flight: usize,
        suspended: bool,
        level: Level,
    ) {
        let before = self.pending.swap(pending, Ordering::SeqCst);
        if pending < before && self.room_waiters.load(Ordering::SeqCst) > 0 {
            // Under the lock the waiters check `pending` in, so none misses the wake-up.
            let _o = self.lock();
            self.room.notify_all();
        }
        self.in_flight.store(in_flight, Ordering::Relaxed);
        self.suspended.store(suspended, Ordering::Relaxed);
        self.level.store(level.number(), Ordering::Relaxed);
    }

    pub(crate) fn publish_recent_p99(&self, ns: u64) {
        self.recent_p99.store(ns, Ordering::Relaxed);
    }

    /// The backend measured `time` of device time for one more command.
    pub(crate) fn add_device_time(&self, time: std::time::Duration) {
        let ns = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.device_ns.fetch_add(ns, Ordering::Relaxed);
        self.device_reported.store(true, Ordering::Relaxed);
    }

    /// The device time the backend reported, if it reports any.
    pub(crate) fn device_time(&self) -> Option<std::time::Duration> {
        self.device_reported
            .load(Ordering::Relaxed)
            .then(|| std::time::Duration::from_nanos(self.device_ns.load(Ordering::Relaxed)))
    }

    /// What `xsched top` shows of this queue that the tracker knows (the queue adds its
    /// accounting and mode).
    pub(crate) fn stats(&self) -> xsched_proto::QueueStats {
        xsched_proto::QueueStats {
            in_flight: self.in_flight.load(Ordering::Relaxed) as u64,
            completed: self.lock().upto,
            recent_p99_us: self.recent_p99.load(Ordering::Relaxed) as f64 / 1e3,
            ..xsched_proto::QueueStats::default()
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
        self.want(id);
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
        self.unwant(id);
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
