//! The devices a probe measures, as [`ProbeTarget`]s, and what survives a preemption on each: the
//! CPU device (whose Level 3 is checked with a kernel that counts its tiles) and the first
//! OpenCL device. Kept apart from the probe's loop so that adding a backend touches one file.

use crate::measure::ProbeTarget;
use std::sync::Arc;
use std::time::Duration;
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_backend_opencl::{OclCommand, OclQueue, SpinKernel};
use xsched_core::Level;
use xsched_runtime::{HwError, QueueOptions, Runtime, RuntimeConfig, RuntimeError, WhoSchedules};

/// What survives a preemption at a level, checked where a command is stopped midway.
pub(crate) trait StateCheck {
    fn state(&self, level: Level) -> Result<(String, Option<bool>), RuntimeError>;
}

/// Levels 1 and 2 never stop a command midway: there is no state at risk to check.
fn unstopped(level: Level) -> (String, Option<bool>) {
    let words = match level {
        Level::Block => "nothing is stopped midway: launched commands drain",
        _ => "nothing is stopped midway: queued commands are held, the running one finishes",
    };
    (words.into(), None)
}

/// The CPU device with one worker.
pub(crate) struct Cpu(pub(crate) CpuDevice);

impl ProbeTarget for Cpu {
    type Hw = CpuQueue;

    fn queue(&self) -> Result<CpuQueue, RuntimeError> {
        Ok(self.0.create_queue())
    }

    fn busy(&self, length: Duration) -> Result<CpuCommand, RuntimeError> {
        Ok(CpuCommand::Kernel(Arc::new(Spin::new(length))))
    }

    fn noop(&self) -> Result<CpuCommand, RuntimeError> {
        Ok(CpuCommand::host(|| {}))
    }
}

impl StateCheck for Cpu {
    /// Level 3: a kernel of 200 tiles of 100 µs, interrupted midway (checked: its tiles stop
    /// advancing while it is held) and restored, runs every tile exactly once: its progress is
    /// kept, nothing is redone or lost. Tried three times, in case the kernel finished before
    /// the interrupt on a busy machine.
    fn state(&self, level: Level) -> Result<(String, Option<bool>), RuntimeError> {
        if level != Level::Interrupt {
            return Ok(unstopped(level));
        }
        let runtime = Runtime::new(RuntimeConfig {
            scheduler: WhoSchedules::App,
            ..RuntimeConfig::default()
        })?;
        let q = runtime.create_queue(
            Arc::new(self.0.create_queue()),
            QueueOptions::default().with_level(Level::Interrupt),
        )?;
        for _ in 0..3 {
            let tally = Arc::new(TileCounter::new(200, Duration::from_micros(100)));
            let h = q.submit(CpuCommand::Kernel(tally.clone()))?;
            let started = std::time::Instant::now();
            while tally.ran() < 5 && started.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_micros(100));
            }
            q.suspend()?;
            // The tile running at the interrupt may still finish.
            std::thread::sleep(Duration::from_millis(1));
            let held_at = tally.ran();
            std::thread::sleep(Duration::from_millis(5));
            let still = tally.ran() == held_at;
            q.resume()?;
            h.wait()
                .map_err(|e| RuntimeError::Hw(HwError::Backend(e.to_string())))?;
            if held_at >= tally.runs.len() {
                continue;
            }
            let kept = still && tally.each_ran_once();
            let words = if kept {
                "progress kept at tile checkpoints: a kernel interrupted midway ran every tile once"
            } else if !still {
                "NOT HELD: an interrupted kernel kept running"
            } else {
                "LOST: an interrupted kernel ran a tile twice or not at all"
            };
            return Ok((words.into(), Some(kept)));
        }
        let words = "not checked: the kernel finished before each of three interrupts";
        Ok((words.into(), None))
    }
}

/// A kernel that counts how often each tile runs, each busy for a fixed time.
struct TileCounter {
    runs: Vec<std::sync::atomic::AtomicU32>,
    per_tile: Duration,
}

impl TileCounter {
    fn new(tiles: usize, per_tile: Duration) -> TileCounter {
        TileCounter {
            runs: (0..tiles)
                .map(|_| std::sync::atomic::AtomicU32::new(0))
                .collect(),
            per_tile,
        }
    }

    /// Tiles run so far.
    fn ran(&self) -> usize {
        self.runs
            .iter()
            .map(|r| r.load(std::sync::atomic::Ordering::SeqCst) as usize)
            .sum()
    }

    fn each_ran_once(&self) -> bool {
        self.runs
            .iter()
            .all(|r| r.load(std::sync::atomic::Ordering::SeqCst) == 1)
    }
}

impl xsched_backend_cpu::Kernel for TileCounter {
    fn tiles(&self) -> u32 {
        u32::try_from(self.runs.len()).unwrap_or(u32::MAX)
    }

    fn run_tile(&self, tile: u32) {
        let end = std::time::Instant::now() + self.per_tile;
        while std::time::Instant::now() < end {
            std::hint::spin_loop();
        }
        if let Some(r) = self.runs.get(tile as usize) {
            r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn name(&self) -> &'static str {
        "tally"
    }
}

/// The first OpenCL device.
pub(crate) struct Ocl(pub(crate) SpinKernel);

fn ocl_error(e: xsched_backend_opencl::OclError) -> RuntimeError {
    RuntimeError::Hw(HwError::Backend(e.to_string()))
}

impl ProbeTarget for Ocl {
    type Hw = OclQueue;

    fn queue(&self) -> Result<OclQueue, RuntimeError> {
        self.0.queue().map_err(ocl_error)
    }

    fn busy(&self, length: Duration) -> Result<OclCommand, RuntimeError> {
        self.0.command(length).map_err(ocl_error)
    }

    fn noop(&self) -> Result<OclCommand, RuntimeError> {
        self.0.command(Duration::ZERO).map_err(ocl_error)
    }
}

impl StateCheck for Ocl {
    fn state(&self, level: Level) -> Result<(String, Option<bool>), RuntimeError> {
        Ok(unstopped(level))
    }
}
