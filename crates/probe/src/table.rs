//! The capability-and-cost table `xsched probe` writes (JSON, and markdown for docs), read
//! back by `xsched probe --compare` and `xsched devices`, and shown by both as one [`Report`]. A file that is not such a table is an
//! error naming the line, column and field; unknown fields are refused, not ignored.

use crate::ProbeError;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use xsched_report::{Report, cells, columns};

/// The table's format version ([`ProbeTable::format`]).
pub const FORMAT: u32 = 1;

/// What one probe measured on one machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeTable {
    /// [`FORMAT`].
    pub format: u32,
    /// When, in seconds since the Unix epoch.
    pub taken_unix_s: u64,
    /// The machine (CPU model, cores, kernel release).
    pub machine: String,
    /// The xsched version that measured.
    pub xsched: String,
    /// Samples per latency point.
    pub samples: u32,
    /// Repeats of each measurement; every percentile is the median of the repeats, every
    /// maximum the largest.
    pub repeats: u32,
    /// One entry per backend probed.
    pub backends: Vec<BackendProbe>,
}

/// One backend on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendProbe {
    /// `cpu`, `opencl`, ...
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// The driver or runtime version the figures belong to (POCL's platform and driver
    /// version strings; the kernel release for the CPU device).
    pub runtime: String,
    /// Every level the backend offers, lowest first.
    pub levels: Vec<LevelProbe>,
}

/// One preemption level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelProbe {
    /// 1, 2 or 3.
    pub level: u8,
    /// Preemption latency over the sweep of background command lengths.
    pub latency: Vec<LatencyPoint>,
    /// What `suspend` costs the calling thread (µs): stop launching, and deactivate or
    /// interrupt at Levels 2 and 3.
    pub suspend_us: Spread,
    /// What `resume` costs (reactivate or restore, and relaunch).
    pub resume_us: Spread,
    /// What state survives a preemption, in words.
    pub state: String,
    /// Whether an interrupted command's result matched an uninterrupted run (Level 3 only;
    /// `None` where no command is stopped midway).
    pub state_kept: Option<bool>,
}

/// Preemption latency beside background commands of one length: from an urgent queue's
/// submission of a no-op command until the application saw it complete.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyPoint {
    /// The background command length (µs).
    pub cmd_us: f64,
    /// P50 (µs).
    pub p50_us: f64,
    /// P99 (µs).
    pub p99_us: f64,
    /// P99.9 (µs).
    pub p999_us: f64,
    /// The worst sample (µs).
    pub max_us: f64,
}

/// A cost's distribution (µs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// P99.
    pub p99: f64,
    /// Worst.
    pub max: f64,
}

impl ProbeTable {
    /// Read a table from JSON text, read from the file at `path` (which errors name).
    pub fn parse(text: &str, path: &Path) -> Result<ProbeTable, ProbeError> {
        let table: ProbeTable =
            serde_json::from_str(text).map_err(|source| ProbeError::Malformed {
                path: path.to_path_buf(),
                source,
            })?;
        if table.format != FORMAT {
            return Err(ProbeError::Format {
                path: path.to_path_buf(),
                found: table.format,
                expected: FORMAT,
            });
        }
        Ok(table)
    }

    /// The table as markdown (for the benchmark record): per backend its device and runtime,
    /// then one row per level and command length.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "Probe of {} (xsched {}; {} samples per point, medians of {} repeats)\n",
            self.machine, self.xsched, self.samples, self.repeats
        );
        for b in &self.backends {
            let _ = write!(
                md,
                "\n**{}**: {}; {}\n\n\
                 | level | cmd µs | P50 µs | P99 µs | P99.9 µs | max µs | suspend P50 / P99 µs | resume P50 / P99 µs | state |\n\
                 |---|---|---|---|---|---|---|---|---|\n",
                b.backend, b.device, b.runtime
            );
            for l in &b.levels {
                for (i, p) in l.latency.iter().enumerate() {
                    let (suspend, resume, state) = if i == 0 {
                        (
                            format!("{} / {}", l.suspend_us.p50, l.suspend_us.p99),
                            format!("{} / {}", l.resume_us.p50, l.resume_us.p99),
                            l.state.clone(),
                        )
                    } else {
                        Default::default()
                    };
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {} | {} | {} | {suspend} | {resume} | {state} |",
                        l.level, p.cmd_us, p.p50_us, p.p99_us, p.p999_us, p.max_us
                    );
                }
            }
        }
        md
    }

    /// The table as rows: one per backend, level and command length.
    pub fn report(&self) -> Report {
        let mut rows = Vec::new();
        for b in &self.backends {
            for l in &b.levels {
                for p in &l.latency {
                    rows.push(cells(&[
                        ("backend", json!(b.backend)),
                        ("level", json!(l.level)),
                        ("cmd_us", json!(p.cmd_us)),
                        ("p50_us", json!(p.p50_us)),
                        ("p99_us", json!(p.p99_us)),
                        ("p999_us", json!(p.p999_us)),
                        ("max_us", json!(p.max_us)),
                        ("suspend_p99_us", json!(l.suspend_us.p99)),
                        ("resume_p99_us", json!(l.resume_us.p99)),
                        ("state_kept", json!(l.state_kept)),
                    ]));
                }
            }
        }
        let runtimes: Vec<String> = self
            .backends
            .iter()
            .map(|b| format!("{}: {} ({})", b.backend, b.device, b.runtime))
            .collect();
        Report::new(
            format!("{}; {}", self.machine, runtimes.join("; ")),
            columns(&[
                "backend",
                "level",
                "cmd_us",
                "p50_us",
                "p99_us",
                "p999_us",
                "max_us",
                "suspend_p99_us",
                "resume_p99_us",
                "state_kept",
            ]),
            rows,
        )
    }
}
