//! The measurements behind a probe, the same for every backend: preemption latency under a
//! saturating background, and what suspend and resume cost the calling thread.

use crate::table::{LatencyPoint, Spread};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xsched_core::{Hint, Level};
use xsched_runtime::{
    HwQueue, QueueOptions, Runtime, RuntimeConfig, RuntimeError, WhoSchedules, XQueue,
};

/// A device to probe: how to make its queues and commands.
pub trait ProbeTarget: Sync {
    /// The hardware queue.
    type Hw: HwQueue;
    /// A new hardware queue on the device.
    fn queue(&self) -> Result<Self::Hw, RuntimeError>;
    /// A command that keeps the device busy for about `length`.
    fn busy(&self, length: Duration) -> Result<<Self::Hw as HwQueue>::Command, RuntimeError>;
    /// A command that does (next to) nothing.
    fn noop(&self) -> Result<<Self::Hw as HwQueue>::Command, RuntimeError>;
}

/// Keep `q` saturated with commands of `length` until `stop`: always plenty submitted and
/// not yet done. A command that cannot be made, submitted or run ends it with the error (so
/// that no figure is measured beside an idle device).
fn saturate<T: ProbeTarget>(
    target: &T,
    q: &XQueue<T::Hw>,
    length: Duration,
    stop: &AtomicBool,
) -> Result<(), RuntimeError> {
    let mut outstanding = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        outstanding.push_back(q.submit(target.busy(length)?)?);
        if outstanding.len() > 32
            && let Some(h) = outstanding.pop_front()
        {
            h.wait().map_err(failed)?;
        }
    }
    Ok(())
}

/// A command that did not complete, as a measurement error.
fn failed(e: xsched_runtime::CommandError) -> RuntimeError {
    RuntimeError::Hw(xsched_runtime::HwError::Backend(format!(
        "a probe command failed: {e}"
    )))
}

/// Run `measure` beside a saturating background on `bg` until it returns; the first error of
/// either.
fn beside_background<T: ProbeTarget>(
    target: &T,
    bg: &XQueue<T::Hw>,
    length: Duration,
    measure: impl FnOnce() -> Result<(), RuntimeError>,
) -> Result<(), RuntimeError> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let background = s.spawn(|| saturate(target, bg, length, &stop));
        std::thread::sleep(Duration::from_millis(20));
        let result = if background.is_finished() {
            Ok(())
        } else {
            measure()
        };
        stop.store(true, Ordering::Relaxed);
        let background = background.join().unwrap_or_else(|_| {
            Err(RuntimeError::Hw(xsched_runtime::HwError::Backend(
                "the background thread panicked".into(),
            )))
        });
        background.and(result)
    })
}

/// Preemption latency at `level` beside background commands of `length`: at random moments an
/// urgent queue (fixed priority, higher) submits a no-op; the time until the application sees
/// it complete.
pub fn latency<T: ProbeTarget>(
    target: &T,
    level: Level,
    length: Duration,
    samples: u32,
    seed: u64,
) -> Result<LatencyPoint, RuntimeError> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let bg_options = QueueOptions::default()
        .with_level(level)
        .with_hint(Hint::Priority(0))?;
    let fg_options = QueueOptions::default()
        .with_level(Level::Block)
        .with_hint(Hint::Priority(1))?;
    let bg = runtime.create_queue(Arc::new(target.queue()?), bg_options)?;
    let fg = runtime.create_queue(Arc::new(target.queue()?), fg_options)?;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let mut hist = xsched_report::new_histogram();
    beside_background(target, &bg, length, || {
        for _ in 0..samples {
            std::thread::sleep(length.mul_f64(rng.random_range(1.0..3.0)));
            let cmd = target.noop()?;
            let asked = Instant::now();
            fg.submit(cmd)?.wait().map_err(failed)?;
            xsched_report::record_duration(&mut hist, asked.elapsed());
        }
        Ok(())
    })?;
    bg.cancel_pending()?;
    Ok(LatencyPoint {
        cmd_us: (length.as_secs_f64() * 1e6).round(),
        p50_us: pct_us(&hist, 0.5),
        p99_us: pct_us(&hist, 0.99),
        p999_us: pct_us(&hist, 0.999),
        max_us: xsched_report::round1(hist.max() as f64 / 1e3),
    })
}

/// What `suspend` and `resume` cost the calling thread at `level`, on a queue kept busy with
/// commands of `length` (so that each suspend finds work in flight).
pub fn suspend_resume<T: ProbeTarget>(
    target: &T,
    level: Level,
    length: Duration,
    samples: u32,
) -> Result<(Spread, Spread), RuntimeError> {
    let runtime = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })?;
    let q = runtime.create_queue(
        Arc::new(target.queue()?),
        QueueOptions::default().with_level(level),
    )?;
    let (mut suspend, mut resume) = (
        xsched_report::new_histogram(),
        xsched_report::new_histogram(),
    );
    beside_background(target, &q, length, || {
        for _ in 0..samples {
            std::thread::sleep(length);
            let t = Instant::now();
            q.suspend()?;
            xsched_report::record_duration(&mut suspend, t.elapsed());
            std::thread::sleep(Duration::from_micros(500));
            let t = Instant::now();
            q.resume()?;
            xsched_report::record_duration(&mut resume, t.elapsed());
        }
        Ok(())
    })?;
    q.cancel_pending()?;
    Ok((spread(&suspend), spread(&resume)))
}

/// A percentile of a nanosecond histogram in microseconds, rounded to 0.1 µs.
fn pct_us(h: &Histogram<u64>, q: f64) -> f64 {
    xsched_report::round1(xsched_report::hist_quantile_us(h, q))
}

fn spread(h: &Histogram<u64>) -> Spread {
    Spread {
        p50: pct_us(h, 0.5),
        p99: pct_us(h, 0.99),
        max: xsched_report::round1(h.max() as f64 / 1e3),
    }
}
