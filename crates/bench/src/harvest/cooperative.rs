//! The collector shared by the HP service and a cooperative LP job, as Hummingbird's LP slices
//! are: the HP service reports to the core's [`Collector`] (the machine the simulator's harvest
//! model drives; only the clock is real), the LP job runs what it grants, and an HP kernel that
//! finds LP work released kills it (a Level-3 suspend of the LP queue, which on this device keeps
//! its progress, so the collector never lets it finish: `Collector::lp_may_finish`). The
//! `priority` baseline's LP job is here (`run_between`); the collector's is in `gated.rs`.

use super::service::Observer;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_core::Nanos;
use xsched_core::harvest::Collector;
use xsched_runtime::{CommandHandle, XQueue};

pub(super) struct State {
    pub(super) collector: Collector,
    /// LP work may run until then (`None`: the LP queue is held).
    pub(super) lp_until: Option<Instant>,
    /// The HP service is done.
    pub(super) done: bool,
}

/// The collector shared by the HP service (which reports to it) and the LP thread.
pub(crate) struct SharedCollector {
    epoch: Instant,
    state: Mutex<State>,
    pub(super) changed: Condvar,
    next_key: Mutex<u64>,
    pub(super) lp: Arc<XQueue<CpuQueue>>,
    /// What an HP kernel takes beyond its length on this device (the runtime's path, measured
    /// alone): the profile the collector gets is length plus this, as Hummingbird profiles HP
    /// kernels by running them.
    overhead: Nanos,
    /// The profile handed to the collector (kept to avoid allocating).
    profile: Mutex<Vec<Nanos>>,
    /// The `slo-aware` rows: the collector gates the LP queue (`gated.rs`) and HP kernels may
    /// kill LP work; `priority` waits.
    pub(super) gated: bool,
}

impl SharedCollector {
    pub(crate) fn new(
        collector: Collector,
        epoch: Instant,
        lp: Arc<XQueue<CpuQueue>>,
        overhead: Duration,
        gated: bool,
    ) -> Self {
        SharedCollector {
            epoch,
            state: Mutex::new(State {
                collector,
                lp_until: None,
                done: false,
            }),
            changed: Condvar::new(),
            next_key: Mutex::new(0),
            lp,
            overhead: Nanos(overhead.as_nanos() as u64),
            profile: Mutex::new(Vec::new()),
            gated,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn at(&self, t: Instant) -> Nanos {
        Nanos(t.saturating_duration_since(self.epoch).as_nanos() as u64)
    }

    pub(super) fn key(&self) -> u64 {
        *self.next_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// The HP service is over: the LP thread drains and returns.
    pub(crate) fn finish_service(&self) {
        self.update(|s| s.done = true);
    }

    /// Block until the HP service is over.
    pub(crate) fn wait_until_done(&self) {
        let mut s = self.lock();
        while !s.done {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Observer for SharedCollector {
    fn arrive(&self, at: Instant, kernels: &[Nanos]) {
        let now = self.at(at);
        let key = self.key();
        let mut profile = self.profile.lock().unwrap_or_else(PoisonError::into_inner);
        profile.clear();
        profile.extend(kernels.iter().map(|&k| k + self.overhead));
        self.update(|s| s.collector.arrive(now, key, &profile));
    }

    fn kernel_queued(&self, at: Instant) {
        let now = self.at(at);
        let key = self.key();
        let mut s = self.lock();
        s.collector.kernel_queued(now, key);
        // Wait or kill: LP work still released on the device may finish only if the collector
        // says so (gated LP stops at its next checkpoint, keeping its progress: never).
        if let Some(until) = s.lp_until.filter(|_| self.gated) {
            let left = until.saturating_duration_since(at);
            if !s
                .collector
                .lp_may_finish(now, Nanos(left.as_nanos() as u64))
                && self.lp.suspend().is_ok()
            {
                s.lp_until = None;
            }
        }
        s.collector.kernel_started(key);
        drop(s);
        self.changed.notify_all();
    }

    fn kernel_done(&self, at: Instant) {
        let now = self.at(at);
        let key = self.key();
        self.update(|s| s.collector.kernel_done(now, key));
    }

    fn finish(&self, at: Instant) {
        let now = self.at(at);
        let mut key = self.next_key.lock().unwrap_or_else(PoisonError::into_inner);
        let k = *key;
        *key += 1;
        drop(key);
        let mut s = self.lock();
        s.collector.finish(now, k);
        // The request's end may open a window: release LP from this thread, already awake.
        self.gate(&mut s, at);
        drop(s);
        self.changed.notify_all();
    }
}

/// What the `priority` LP thread does next.
enum Next {
    Issue,
    Drain,
    Wait,
    Return,
}

/// The `priority` baseline's LP job: one `slice` at a time while no HP request is in flight
/// (at most two launches on the device, one running and one queued behind it); returns when
/// and how much LP work completed.
pub(crate) fn run_between(shared: &SharedCollector, slice: Duration) -> Vec<(Instant, Duration)> {
    let mut done = Vec::new();
    let mut inflight: VecDeque<CommandHandle> = VecDeque::new();
    loop {
        let next = {
            let s = shared.lock();
            if !s.done && s.collector.in_flight() == 0 && inflight.len() < 2 {
                Next::Issue
            } else if !inflight.is_empty() {
                Next::Drain
            } else if s.done {
                Next::Return
            } else {
                Next::Wait
            }
        };
        match next {
            Next::Issue => {
                let kernel = Arc::new(Spin::new(slice));
                if let Ok(h) = shared.lp.submit(CpuCommand::Kernel(kernel)) {
                    inflight.push_back(h);
                }
            }
            Next::Drain => {
                let settled = inflight
                    .front()
                    .and_then(|h| h.wait_timeout(Duration::from_millis(1)));
                if let Some(result) = settled
                    && inflight.pop_front().is_some()
                    && result.is_ok()
                {
                    done.push((Instant::now(), slice));
                }
            }
            Next::Wait => {
                let s = shared.lock();
                let _ = shared
                    .changed
                    .wait_timeout(s, Duration::from_millis(1))
                    .unwrap_or_else(PoisonError::into_inner);
            }
            Next::Return => return done,
        }
    }
}
