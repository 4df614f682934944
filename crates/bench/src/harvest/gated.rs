//! The collector rows' LP job on a device whose Level 3 keeps a stopped kernel's progress (the
//! CPU device): LP slices end at a device checkpoint, not at a command's completion somebody
//! must observe. The LP queue always holds work (a few long chunks) and is gated: released for
//! what the collector grants, held (a Level-3 suspend) when a release runs out and the collector
//! grants nothing more, or when an HP kernel kills it. The grant is decided where the device
//! already is, so no thread is woken for it:
//!
//! - at an HP kernel's end, on the device's worker that ran its last tile (`on_tile.rs`): the
//!   LP work for the gap after it starts on that worker;
//! - after each LP tile, on the same worker: a release that ran out is extended by the next
//!   grant without stopping, or held at this checkpoint;
//! - at the end of a request (the HP thread, already awake).
//!
//! The LP thread only keeps the queue supplied and looks now and then (a held queue with a
//! grant it missed).

use super::cooperative::{SharedCollector, State};
use super::on_tile::{OnTile, TileFn};
use super::service::dur;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use xsched_backend_cpu::CpuCommand;
use xsched_backend_cpu::kernels::Spin;
use xsched_core::Nanos;
use xsched_core::harvest::Grant;
use xsched_runtime::CommandHandle;

/// LP work per command: long, since a slice no longer ends a command.
const CHUNK: Duration = Duration::from_millis(2);
/// Chunks kept submitted, so the device never runs out while the LP thread sleeps.
const CHUNKS: usize = 3;
/// How long the LP thread sleeps between looks (the queue's supply lasts far longer).
const POLL: Duration = Duration::from_millis(1);

/// What to do with the LP queue at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LpStep {
    /// Let it run until then (releasing it if held).
    Run(Instant),
    /// Hold it (its release ran out and nothing more is granted).
    Hold,
    /// Leave it as it is.
    Keep,
}

/// A release still running is left alone; one that ran out is extended by what the collector
/// grants now (`grant`, asked only then) or held; a held queue is released by a grant.
fn decide(
    now: Instant,
    until: Option<Instant>,
    grant: impl FnOnce() -> Option<Duration>,
) -> LpStep {
    if until.is_some_and(|u| u > now) {
        return LpStep::Keep;
    }
    match grant() {
        Some(work) => LpStep::Run(now + work),
        None if until.is_some() => LpStep::Hold,
        None => LpStep::Keep,
    }
}

/// How long one release lasts for a grant: paced slices one at a time (the collector is asked
/// again at each slice's end), everything else whole.
fn release(g: Grant, slice: Duration) -> Duration {
    match g {
        Grant::Paced { useful, .. } => slice.min(dur(useful)),
        Grant::Merged(len) | Grant::Fitted(len) | Grant::Overrun(len) => dur(len),
    }
}

impl SharedCollector {
    /// Apply [`decide`] to the LP queue at `at`, under the state lock.
    pub(super) fn gate(&self, s: &mut State, at: Instant) {
        if s.done || !self.gated {
            return;
        }
        let slice = dur(s.collector.config().slice);
        let from = self.at(at);
        let collector = &s.collector;
        let gate = decide(at, s.lp_until, || {
            collector.grant(from, Nanos::MAX).map(|g| release(g, slice))
        });
        match gate {
            LpStep::Run(until) => {
                if s.lp_until.is_some() || self.lp.resume().is_ok() {
                    s.lp_until = Some(until);
                }
            }
            LpStep::Hold => {
                if self.lp.suspend().is_ok() {
                    s.lp_until = None;
                }
            }
            LpStep::Keep => {}
        }
    }

    /// An LP tile ended (on the device's worker that ran it): a release that ran out is
    /// extended or held here, at this checkpoint.
    fn lp_tile_end(&self) {
        let at = Instant::now();
        let mut s = self.lock();
        if s.lp_until.is_some_and(|u| u <= at) {
            self.gate(&mut s, at);
        }
    }

    /// An HP kernel ended (called on the device's worker that finished it, before it reports
    /// the completion). Nobody is woken: the LP thread only keeps the supply, and a wake-up
    /// here (a futex call, and the woken thread often placed on this very core, where the
    /// worker's next yield hands it the core) delayed the HP completion by tens of µs.
    pub(super) fn hp_kernel_end(&self) {
        let at = Instant::now();
        let (now, key) = (self.at(at), self.key());
        let mut s = self.lock();
        s.collector.kernel_done(now, key);
        self.gate(&mut s, at);
    }
}

/// The LP job: keep [`CHUNKS`] chunks submitted to the gated LP queue (their ends counted on
/// the device), and return when and how much LP work completed.
pub(crate) fn run_gated(shared: &Arc<SharedCollector>) -> Vec<(Instant, Duration)> {
    let ended: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let after: TileFn = {
        let (shared, ended) = (shared.clone(), ended.clone());
        Arc::new(move |last| {
            if last {
                lock(&ended).push(Instant::now());
            }
            shared.lp_tile_end();
        })
    };
    {
        let mut s = shared.lock();
        if shared.lp.suspend().is_ok() {
            s.lp_until = None;
        }
    }
    let mut submitted = 0usize;
    let mut newest: Option<CommandHandle> = None;
    loop {
        while submitted - lock(&ended).len() < CHUNKS {
            let kernel = Arc::new(OnTile::new(Spin::new(CHUNK), after.clone()));
            match shared.lp.submit(CpuCommand::Kernel(kernel)) {
                Ok(h) => newest = Some(h),
                Err(_) => break,
            }
            submitted += 1;
        }
        let mut s = shared.lock();
        if s.done {
            break;
        }
        shared.gate(&mut s, Instant::now());
        let _ = shared
            .changed
            .wait_timeout(s, POLL)
            .unwrap_or_else(PoisonError::into_inner);
    }
    // The service is over: let what is queued finish (in order: the newest ends last).
    let _ = shared.lp.resume();
    if let Some(h) = newest {
        let _ = h.wait();
    }
    let ended = lock(&ended);
    ended.iter().map(|&t| (t, CHUNK)).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Duration {
        Duration::from_micros(x)
    }

    #[test]
    fn a_running_release_is_kept_without_asking() {
        let now = Instant::now();
        let asked = std::cell::Cell::new(false);
        let gate = decide(now, Some(now + us(10)), || {
            asked.set(true);
            Some(us(200))
        });
        assert_eq!(gate, LpStep::Keep);
        assert!(!asked.get());
    }

    #[test]
    fn a_release_that_ran_out_is_extended_or_held() {
        let now = Instant::now();
        let ran_out = Some(now);
        assert_eq!(
            decide(now, ran_out, || Some(us(200))),
            LpStep::Run(now + us(200))
        );
        assert_eq!(decide(now, ran_out, || None), LpStep::Hold);
    }

    #[test]
    fn a_held_queue_runs_only_when_granted() {
        let now = Instant::now();
        assert_eq!(
            decide(now, None, || Some(us(50))),
            LpStep::Run(now + us(50))
        );
        assert_eq!(decide(now, None, || None), LpStep::Keep);
    }

    #[test]
    fn paced_grants_release_one_slice_and_the_others_whole() {
        let n = Nanos::from_us;
        let slice = us(200);
        let paced = Grant::Paced {
            slices: 3,
            useful: n(600),
        };
        assert_eq!(release(paced, slice), us(200));
        let short = Grant::Paced {
            slices: 1,
            useful: n(120),
        };
        assert_eq!(release(short, slice), us(120));
        for g in [
            Grant::Merged(n(4000)),
            Grant::Fitted(n(60)),
            Grant::Overrun(n(200)),
        ] {
            assert_eq!(release(g, slice), dur(g.useful()));
        }
    }
}
