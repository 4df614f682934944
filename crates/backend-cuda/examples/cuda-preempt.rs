//! Preemption latency on a CUDA device, Level 1 against gated Level 2, by command length.
//!
//! A background XQueue keeps a stream saturated with `work` kernels of length T (filling the
//! device with `blocks` × `threads`); at each sample the background is suspended and a one-block
//! foreground kernel on another stream is submitted; the latency is suspend → foreground done.
//! One JSON line per (level, T), then nothing else. Run by `scripts/gpu-check.sh`:
//!
//! ```sh
//! cargo run --release -p xsched-backend-cuda --example cuda-preempt -- \
//!     samples=40 lengths=100,500,2000 blocks=1056 threads=256
//! ```
//!
//! On the tests' fake driver (`LD_LIBRARY_PATH` at its folder) it runs too, which checks the
//! plumbing only: the fake device's timing says nothing about a GPU.

#[path = "../tests/common/work.rs"]
mod work;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use work::Work;
use xsched_backend_cuda::{CudaDevice, CudaStream};
use xsched_core::Level;
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, WhoSchedules, XQueue};

fn arg(name: &str, default: &str) -> String {
    std::env::args()
        .skip(1)
        .find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_string))
        .unwrap_or_else(|| default.to_string())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

/// The sweep's kernels and samples, from `name=value` arguments.
struct Shape {
    /// Preemptions measured per (level, T).
    samples: usize,
    /// Blocks of each background kernel.
    blocks: u32,
    /// Threads per block of each background kernel.
    threads: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shape = Shape {
        samples: arg("samples", "40").parse()?,
        blocks: arg("blocks", "1056").parse()?,
        threads: arg("threads", "256").parse()?,
    };
    let lengths: Vec<u32> = arg("lengths", "100,500,2000")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let device = xsched_backend_cuda::devices()?.remove(0);
    let runtime = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })?;
    let levels: &[Level] = if device.stream_memops {
        &[Level::Block, Level::Deactivate]
    } else {
        &[Level::Block]
    };
    for &us in &lengths {
        for &level in levels {
            measure(&runtime, &device, level, us, &shape)?;
        }
    }
    Ok(())
}

/// One (level, T) point: a background queue at `level` saturated with `us`-µs kernels, preempted
/// `shape.samples` times by a foreground queue; prints its JSON line.
fn measure(
    runtime: &Runtime,
    device: &CudaDevice,
    level: Level,
    us: u32,
    shape: &Shape,
) -> Result<(), Box<dyn std::error::Error>> {
    let bg_hw = Arc::new(CudaStream::new(device.ordinal)?);
    let fg_hw = Arc::new(CudaStream::new(device.ordinal)?);
    let work = Arc::new(Work::new(1 << 20));
    let bg = Arc::new(runtime.create_queue(bg_hw, QueueOptions::default().with_level(level))?);
    let fg = runtime.create_queue(fg_hw, QueueOptions::default())?;
    let (bg_cmd_us, fg_alone_us) = standalone(&bg, &fg, &work, us, shape)?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(&bg, &work, &stop, us, shape);
    let mut lat = preempt(&bg, &fg, &work, us, shape.samples)?;
    stop.store(true, Ordering::Relaxed);
    let _ = feeder.join();
    bg.cancel_pending()?;
    // Cancelled commands report `Cancelled`; what matters is that nothing is left.
    let _ = bg.wait_all();
    lat.sort_by(f64::total_cmp);
    println!(
        "{{\"device\":{:?},\"level\":{},\"cmd_us\":{:.0},\"fg_alone_us\":{:.0},\"p50_us\":{:.0},\"p99_us\":{:.0},\"samples\":{}}}",
        device.name,
        level as u8,
        bg_cmd_us,
        fg_alone_us,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        shape.samples
    );
    Ok(())
}

/// Standalone: the background's command length and the foreground's own latency (µs), each
/// measured on its second run (the first loads the module).
fn standalone(
    bg: &XQueue<CudaStream>,
    fg: &XQueue<CudaStream>,
    work: &Work,
    us: u32,
    shape: &Shape,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let (mut bg_cmd_us, mut fg_alone_us) = (0.0, 0.0);
    for _ in 0..2 {
        let t = Instant::now();
        bg.submit(work.command_on(us, 0, shape.blocks, shape.threads))?
            .wait()?;
        bg_cmd_us = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        fg.submit(work.command(1, 1))?.wait()?;
        fg_alone_us = t.elapsed().as_secs_f64() * 1e6;
    }
    Ok((bg_cmd_us, fg_alone_us))
}

/// A thread keeping `bg` saturated with `us`-µs kernels (32 pending at most) until `stop`.
fn feed(
    bg: &Arc<XQueue<CudaStream>>,
    work: &Arc<Work>,
    stop: &Arc<AtomicBool>,
    us: u32,
    shape: &Shape,
) -> JoinHandle<()> {
    let (bg, work, stop) = (bg.clone(), work.clone(), stop.clone());
    let (blocks, threads) = (shape.blocks, shape.threads);
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if bg.query().pending < 32 {
                let _ = bg.submit(work.command_on(us, 2, blocks, threads));
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    })
}

/// `samples` preemptions of `bg` at staggered moments, each latency (µs) from suspending it to
/// the foreground's one-block command done.
fn preempt(
    bg: &XQueue<CudaStream>,
    fg: &XQueue<CudaStream>,
    work: &Work,
    us: u32,
    samples: usize,
) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples {
        std::thread::sleep(Duration::from_micros(
            u64::from(us) * 3 + (i as u64 % 7) * 97,
        ));
        let t = Instant::now();
        bg.suspend()?;
        fg.submit(work.command(1, 1))?.wait()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        bg.resume()?;
    }
    Ok(lat)
}
