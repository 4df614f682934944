//! LP work issued by a cooperative LP job that asks the core's [`Collector`] what it may run,
//! as Hummingbird's LP slices do: the HP service reports to the collector, the LP thread issues
//! `Spin` kernels as the collector grants them, and an HP kernel that finds LP work running
//! kills it (a Level-3 suspend of the LP queue) unless every deadline's slack covers the rest.
//! The same collector the simulator's harvest model drives; only the clock is real.

use super::service::{Observer, dur};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_core::Nanos;
use xsched_core::harvest::{Collector, CollectorConfig, Grant};
use xsched_runtime::{CommandHandle, XQueue};

/// When the cooperative LP job may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// One slice at a time, only while no HP request is in flight.
    BetweenRequests,
    /// What the collector grants (windows, merging, slack).
    Collector,
}

struct State {
    collector: Collector,
    /// LP work on the device (or queued) until about then.
    lp_until: Option<Instant>,
    /// LP work a kill left held on the device (Level 3 keeps its progress): it may resume only
    /// into a grant that fits it.
    held: Duration,
    /// The HP service is done.
    done: bool,
}

/// The collector shared by the HP service (which reports to it) and the LP thread.
pub(crate) struct Shared<'a> {
    epoch: Instant,
    state: Mutex<State>,
    changed: Condvar,
    next_key: Mutex<u64>,
    lp: &'a XQueue<CpuQueue>,
    /// What an HP kernel takes beyond its length on this device (the runtime's path, measured
    /// alone): the profile the collector gets is length plus this, as Hummingbird profiles HP
    /// kernels by running them.
    overhead: Nanos,
    /// The profile handed to the collector (kept to avoid allocating).
    profile: Mutex<Vec<Nanos>>,
    /// Whether HP kernels may kill LP work (the `slo-aware` rows; `priority` waits).
    kills: bool,
    /// The LP queue was suspended (killed) for an HP kernel.
    killed: AtomicBool,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(
        cfg: CollectorConfig,
        epoch: Instant,
        lp: &'a XQueue<CpuQueue>,
        overhead: Duration,
        kills: bool,
    ) -> Self {
        Shared {
            epoch,
            state: Mutex::new(State {
                collector: Collector::new(cfg),
                lp_until: None,
                held: Duration::ZERO,
                done: false,
            }),
            changed: Condvar::new(),
            next_key: Mutex::new(0),
            lp,
            overhead: Nanos(overhead.as_nanos() as u64),
            profile: Mutex::new(Vec::new()),
            kills,
            killed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn at(&self, t: Instant) -> Nanos {
        Nanos(t.saturating_duration_since(self.epoch).as_nanos() as u64)
    }

    fn key(&self) -> u64 {
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

impl Observer for Shared<'_> {
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
        // Wait or kill: LP work still on the device may finish only if the slack covers it.
        if let Some(until) = s.lp_until.filter(|&u| self.kills && u > at) {
            let left = until.duration_since(at);
            if !s.collector.slack_covers(now, Nanos(left.as_nanos() as u64))
                && self.lp.suspend().is_ok()
            {
                self.killed.store(true, Ordering::SeqCst);
                s.held = left;
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
        self.update(|s| {
            s.collector.finish(now, k);
        });
    }
}

/// What the LP thread does next.
enum Next {
    Issue(Duration),
    Drain,
    Wait,
    Return,
}

/// The LP job: issue what `admission` allows, keep at most two launches on the device (one
/// running, one queued behind it), and return when and how much LP work completed. Each grant
/// is asked for the time the LP work already queued will end, so two launches never overfill a
/// window. A killed LP queue stays suspended (its interrupted kernel held) until work is granted
/// again.
pub(crate) fn run_lp(
    shared: &Shared<'_>,
    admission: Admission,
    slice: Duration,
) -> Vec<(Instant, Duration)> {
    let mut done = Vec::new();
    let mut inflight: VecDeque<(CommandHandle, Duration)> = VecDeque::new();
    loop {
        let next = {
            let mut s = shared.lock();
            let now = Instant::now();
            let queued = s
                .lp_until
                .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
            let from = shared.at(now + queued);
            let mut granted = Duration::ZERO;
            let grant = if s.done {
                None
            } else {
                match admission {
                    Admission::BetweenRequests => (s.collector.in_flight() == 0).then_some(slice),
                    Admission::Collector => s.collector.grant(from, Nanos::MAX).map(|g| {
                        granted = dur(g.useful());
                        first_launch(g, slice)
                    }),
                }
            };
            if shared.killed.load(Ordering::SeqCst) {
                if (grant.is_some() && granted >= s.held) || s.done {
                    shared.killed.store(false, Ordering::SeqCst);
                    let _ = shared.lp.resume();
                    s.lp_until = Some(now + s.held);
                    s.held = Duration::ZERO;
                    continue;
                }
                Next::Wait
            } else if let Some(w) = grant.filter(|_| inflight.len() < 2) {
                s.lp_until = Some(now + queued + w);
                Next::Issue(w)
            } else if !inflight.is_empty() {
                Next::Drain
            } else if s.done {
                Next::Return
            } else {
                Next::Wait
            }
        };
        match next {
            Next::Issue(work) => {
                let kernel = Arc::new(Spin::new(work));
                if let Ok(h) = shared.lp.submit(CpuCommand::Kernel(kernel)) {
                    inflight.push_back((h, work));
                }
            }
            Next::Drain => {
                // Bounded, so a kill (which holds the command) is noticed.
                let settled = inflight
                    .front()
                    .and_then(|(h, _)| h.wait_timeout(Duration::from_millis(1)));
                if let Some(result) = settled
                    && let Some((_, work)) = inflight.pop_front()
                    && result.is_ok()
                {
                    done.push((Instant::now(), work));
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

/// The LP kernel to launch for a grant: paced slices go one at a time (the collector is asked
/// again after each), everything else is one launch.
fn first_launch(g: Grant, slice: Duration) -> Duration {
    match g {
        Grant::Paced { useful, .. } => slice.min(dur(useful)),
        Grant::Merged(len) | Grant::Fitted(len) | Grant::Overrun(len) => dur(len),
    }
}
