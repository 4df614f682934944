//! # xsched-probe
//!
//! What this machine's accelerators can stop, and at what cost. It exists apart from the
//! experiments (`xsched-bench`) because it is a tool of its own with its own file: `xsched
//! devices` lists what [`devices`] discovers beside the last table kept, and `xsched probe`
//! measures a new table, keeps it ([`store`]) and compares it with an earlier one ([`compare`](mod@compare)).
//! The CLI only parses arguments and prints.
//!
//! `xsched probe` measures, on this machine, what each available backend and level can stop and
//! at what cost, and keeps it as a capability-and-cost table stamped with the driver or runtime
//! version (../shared/docs/PAPERS.md §1: "keep a verified table of what each device and driver
//! can stop, at what worst-case cost, re-measured after every driver update").
//!
//! Per backend and level: preemption latency over a sweep of background command lengths
//! (P50/P99/P99.9/max), what suspend and resume cost the calling thread, and what state
//! survives (at Level 3, whether an interrupted command's result matches an uninterrupted
//! run). [`compare`](mod@compare) flags what regressed against an earlier table.
//!
//! - [`devices`]: the real backends of this build and their devices, and this machine's name.
//! - [`table`]: the table's format (JSON, and markdown for docs).
//! - [`compare`](mod@compare): what regressed from one table to the next.
//! - [`store`]: where the last table is kept for `xsched devices`, and `--out`'s files.
//!
//! # Errors
//!
//! Every fallible function returns [`ProbeError`]: a backend absent or unusable, a measurement
//! that failed, or a table that could not be kept or read back (naming the file).

pub mod compare;
pub mod devices;
mod error;
mod measure;
pub mod store;
pub mod table;
mod targets;

pub use compare::{Regression, Tolerance, compare};
pub use devices::{ListedDevice, machine};
pub use error::ProbeError;
pub use table::{BackendProbe, LatencyPoint, LevelProbe, ProbeTable, Spread};

use measure::ProbeTarget;
use std::time::Duration;
use targets::{Cpu, Ocl, StateCheck};
use xsched_backend_cpu::CpuDevice;
use xsched_backend_opencl::SpinKernel;
use xsched_core::{Capabilities, Level};
use xsched_runtime::HwQueue as _;
use xsched_runtime::RuntimeError;

/// The backends a probe knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The built-in CPU device.
    Cpu,
    /// The first OpenCL device (POCL here).
    OpenCl,
    /// The first CUDA device: discovered, but probing it is not built yet.
    Cuda,
}

impl Backend {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::OpenCl => "opencl",
            Backend::Cuda => "cuda",
        }
    }

    /// `Ok` if this machine has the backend and a probe can measure it.
    pub fn probeable(self) -> Result<(), ProbeError> {
        match self {
            Backend::Cpu => Ok(()),
            Backend::OpenCl => xsched_backend_opencl::devices()
                .map(drop)
                .map_err(ProbeError::OpenClAbsent),
            Backend::Cuda => Err(cuda_refusal()),
        }
    }
}

/// Why CUDA cannot be probed here: it is absent, or present but its probe is not built yet.
fn cuda_refusal() -> ProbeError {
    match xsched_backend_cuda::devices() {
        Err(e) => ProbeError::CudaAbsent(e),
        Ok(_) => ProbeError::NotBuilt {
            backend: Backend::Cuda.name(),
            instead: "scripts/gpu-check.sh measures its preemption latency",
        },
    }
}

/// What a probe runs.
#[derive(Clone, Debug)]
pub struct ProbeParams {
    /// The backends (each must be present).
    pub backends: Vec<Backend>,
    /// The background command lengths of the latency sweep.
    pub lengths: Vec<Duration>,
    /// Samples per latency point and per cost.
    pub samples: u32,
    /// Each latency point and cost is measured this many times and every percentile is the
    /// median of the repeats (one noisy stretch of the machine then moves no figure), every
    /// maximum the largest.
    pub repeats: u32,
    /// Skip, with a warning, a backend that is present but cannot be set up for the probe (a
    /// driver that cannot build the busy kernel); otherwise that is an error.
    pub skip_unusable: bool,
}

impl ProbeParams {
    /// The backends to probe: those asked for, each of which must be probeable here, or by
    /// default the CPU device and OpenCL when an OpenCL device is present (a default one that
    /// turns out unusable is then skipped, not an error).
    pub fn with_backends(mut self, asked: &[Backend]) -> Result<ProbeParams, ProbeError> {
        self.skip_unusable = asked.is_empty();
        self.backends = if asked.is_empty() {
            [Backend::Cpu, Backend::OpenCl]
                .into_iter()
                .filter(|b| b.probeable().is_ok())
                .collect()
        } else {
            for b in asked {
                b.probeable()?;
            }
            asked.to_vec()
        };
        Ok(self)
    }
}

impl Default for ProbeParams {
    /// The CPU device and OpenCL, 100 µs to 2 ms, 200 samples.
    fn default() -> Self {
        ProbeParams {
            backends: vec![Backend::Cpu, Backend::OpenCl],
            lengths: [100, 500, 1000, 2000]
                .into_iter()
                .map(Duration::from_micros)
                .collect(),
            samples: 200,
            repeats: 3,
            skip_unusable: false,
        }
    }
}

/// Probe every backend in `p`; `progress(done, total)` after each measurement.
pub fn run(p: &ProbeParams, progress: &dyn Fn(usize, usize)) -> Result<ProbeTable, ProbeError> {
    // Each level: the latency sweep, the costs and the state check.
    let steps = Steps {
        done: 0,
        total: p.backends.len() * 3 * (p.lengths.len() + 2),
        progress,
    };
    let mut steps = steps;
    let mut backends = Vec::new();
    for &b in &p.backends {
        let run_err = |source: RuntimeError| ProbeError::Run {
            backend: b.name(),
            source,
        };
        let probe = match b {
            Backend::Cpu => {
                let device = CpuDevice::new(1).map_err(|e| run_err(RuntimeError::from(e)))?;
                let cpu = Cpu(device);
                BackendProbe {
                    backend: b.name().into(),
                    device: "built-in CPU device (one worker)".into(),
                    runtime: format!(
                        "{}; Linux {}",
                        devices::cpu_model(),
                        devices::kernel_release()
                    ),
                    levels: levels(&cpu, &CpuDevice::capabilities(), p, &mut steps)
                        .map_err(run_err)?,
                }
            }
            Backend::OpenCl => {
                let unusable = |e: xsched_backend_opencl::OclError| match e {
                    e @ xsched_backend_opencl::OclError::Unavailable(_) => {
                        ProbeError::OpenClAbsent(e)
                    }
                    other => ProbeError::OpenClUnusable(other),
                };
                let kernel = SpinKernel::first_device().and_then(|mut k| k.calibrate().map(|()| k));
                let kernel = match kernel.map_err(unusable) {
                    Ok(k) => k,
                    Err(ProbeError::OpenClUnusable(e)) if p.skip_unusable => {
                        tracing::warn!(
                            "skipped: backend opencl is present but cannot be probed: {e}"
                        );
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let versions = kernel.versions().clone();
                let ocl = Ocl(kernel);
                let caps = ocl.queue().map_err(run_err)?.capabilities().clone();
                BackendProbe {
                    backend: b.name().into(),
                    device: versions.device,
                    runtime: format!("{}; driver {}", versions.platform, versions.driver),
                    levels: levels(&ocl, &caps, p, &mut steps).map_err(run_err)?,
                }
            }
            Backend::Cuda => return Err(cuda_refusal()),
        };
        backends.push(probe);
    }
    (steps.progress)(steps.total, steps.total);
    Ok(ProbeTable {
        format: table::FORMAT,
        taken_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        machine: machine(),
        xsched: env!("CARGO_PKG_VERSION").into(),
        samples: p.samples,
        repeats: p.repeats.max(1),
        backends,
    })
}

/// Progress through the probe's measurements.
struct Steps<'a> {
    done: usize,
    total: usize,
    progress: &'a dyn Fn(usize, usize),
}

impl Steps<'_> {
    fn tick(&mut self) {
        (self.progress)(self.done, self.total);
        self.done += 1;
    }
}

/// Every level `caps` offers, measured on `target`.
fn levels<T: ProbeTarget + StateCheck>(
    target: &T,
    caps: &Capabilities,
    p: &ProbeParams,
    steps: &mut Steps<'_>,
) -> Result<Vec<LevelProbe>, RuntimeError> {
    let mut out = Vec::new();
    for level in Level::ALL.into_iter().filter(|&l| l <= caps.max_level) {
        let mut latency = Vec::new();
        for (i, &length) in p.lengths.iter().enumerate() {
            steps.tick();
            let runs = (0..p.repeats.max(1))
                .map(|r| {
                    let seed = 1 + i as u64 + 1000 * u64::from(r);
                    measure::latency(target, level, length, p.samples, seed)
                })
                .collect::<Result<Vec<_>, _>>()?;
            latency.push(LatencyPoint {
                cmd_us: runs[0].cmd_us,
                p50_us: median(runs.iter().map(|r| r.p50_us)),
                p99_us: median(runs.iter().map(|r| r.p99_us)),
                p999_us: median(runs.iter().map(|r| r.p999_us)),
                max_us: runs.iter().map(|r| r.max_us).fold(0.0, f64::max),
            });
        }
        steps.tick();
        let cost_length = p
            .lengths
            .iter()
            .copied()
            .max()
            .unwrap_or(Duration::from_millis(1));
        let costs = (0..p.repeats.max(1))
            .map(|_| measure::suspend_resume(target, level, cost_length, p.samples))
            .collect::<Result<Vec<_>, _>>()?;
        let spread_of = |pick: fn(&(Spread, Spread)) -> Spread| Spread {
            p50: median(costs.iter().map(|c| pick(c).p50)),
            p99: median(costs.iter().map(|c| pick(c).p99)),
            max: costs.iter().map(|c| pick(c).max).fold(0.0, f64::max),
        };
        let (suspend_us, resume_us) = (spread_of(|c| c.0), spread_of(|c| c.1));
        steps.tick();
        let (state, state_kept) = target.state(level)?;
        out.push(LevelProbe {
            level: level.number(),
            latency,
            suspend_us,
            resume_us,
            state,
            state_kept,
        });
    }
    Ok(out)
}

/// The median of the repeats' figures (`xsched-report`'s nearest rank; 0 for none).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    xsched_report::quantile(&values, 0.5).unwrap_or(0.0)
}
