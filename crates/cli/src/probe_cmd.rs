//! `xsched probe`: measure this machine's backends (or read a table), save it where
//! `xsched devices` finds it, and compare it with an earlier one.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xsched_bench::probe::{self, Backend, ProbeParams, ProbeTable, Tolerance};
use xsched_report::{Report, cells, columns};

/// A backend `--backend` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendName {
    /// The built-in CPU device.
    Cpu,
    /// The first OpenCL device.
    Opencl,
    /// The first CUDA device.
    Cuda,
}

/// `xsched probe`'s arguments.
#[derive(Args)]
pub struct ProbeArgs {
    /// Backends to probe, comma-separated (default: cpu, and opencl when an OpenCL device is
    /// present).
    #[arg(long, value_delimiter = ',')]
    backend: Vec<BackendName>,
    /// Samples per latency point and per cost (default 200).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    samples: Option<u32>,
    /// Repeats of each measurement; figures are the medians (default 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: Option<u32>,
    /// Background command lengths of the latency sweep, in µs, comma-separated (default
    /// 100,500,1000,2000).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    lengths_us: Vec<u64>,
    /// Also write the table into this directory as probe.json and probe.md.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Compare with an earlier table and fail if any figure regressed.
    #[arg(long, value_name = "OLD.json")]
    compare: Option<PathBuf>,
    /// With --compare: compare this table instead of probing now.
    #[arg(long, value_name = "NEW.json", requires = "compare")]
    table: Option<PathBuf>,
    /// With --compare: the growth a median (P50) may show before it counts as a regression, as
    /// a fraction (0.5: up to 1.5 times the old figure).
    #[arg(long, default_value_t = 0.5, value_parser = fraction, requires = "compare")]
    threshold: f64,
    /// With --compare: the same for tails (P99, P99.9, the costs' P99), which vary more.
    #[arg(long, default_value_t = 1.0, value_parser = fraction, requires = "compare")]
    tail_threshold: f64,
    /// With --compare: growth in µs never counted as a regression (noise on small figures).
    #[arg(long, default_value_t = 20.0, value_parser = fraction, requires = "compare")]
    floor_us: f64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
}

fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err(format!("`{s}` is not a finite number >= 0")),
    }
}

/// Where the last probe is kept for `xsched devices`.
pub fn last_probe_path() -> Option<PathBuf> {
    xsched_llm_predict::embed_cache::default_dir().map(|d| d.join("probe.json"))
}

/// Read a table, naming the file in any error.
pub fn read_table(path: &Path) -> Result<ProbeTable> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading probe table {}", path.display()))?;
    ProbeTable::parse(&text).with_context(|| format!("probe table {}", path.display()))
}

/// Run `xsched probe`.
pub fn run(a: &ProbeArgs) -> Result<()> {
    // A bad baseline fails before minutes of measuring.
    let old = a.compare.as_deref().map(read_table).transpose()?;
    let table = match &a.table {
        Some(path) => read_table(path)?,
        None => {
            let table = measure(a)?;
            save(&table, a.out.as_deref())?;
            table
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&table)?);
    } else {
        crate::output::print_report("probe", &report(&table), false)?;
    }
    let Some(old) = old else { return Ok(()) };
    let tolerance = Tolerance {
        fraction: a.threshold,
        tail_fraction: a.tail_threshold,
        floor_us: a.floor_us,
    };
    let regressions = probe::compare(&old, &table, tolerance);
    let old_path = a
        .compare
        .as_deref()
        .map_or_else(String::new, |p| p.display().to_string());
    if regressions.is_empty() {
        eprintln!(
            "no figure regressed against {old_path} (medians {:.0} %, tails {:.0} %, and {} us)",
            a.threshold * 100.0,
            a.tail_threshold * 100.0,
            a.floor_us
        );
        return Ok(());
    }
    let rows = regressions
        .iter()
        .map(|r| {
            cells(&[
                ("figure", json!(r.figure)),
                ("old", json!(r.old)),
                ("new", json!(r.new)),
            ])
        })
        .collect();
    let flagged = Report::new(
        format!("regressions against {old_path}"),
        columns(&["figure", "old", "new"]),
        rows,
    );
    crate::output::print_report("probe --compare", &flagged, false)?;
    bail!(
        "{} figure(s) regressed against {old_path} beyond {:.0} % (medians) or {:.0} % (tails) \
         and {} us",
        regressions.len(),
        a.threshold * 100.0,
        a.tail_threshold * 100.0,
        a.floor_us
    )
}

fn measure(a: &ProbeArgs) -> Result<ProbeTable> {
    let mut p = ProbeParams::default();
    p.samples = a.samples.unwrap_or(p.samples);
    p.repeats = a.repeats.unwrap_or(p.repeats);
    if !a.lengths_us.is_empty() {
        p.lengths = a
            .lengths_us
            .iter()
            .map(|&us| Duration::from_micros(us))
            .collect();
    }
    // Backends chosen by default are skipped if unusable; one asked for must work.
    p.skip_unusable = a.backend.is_empty();
    p.backends = if a.backend.is_empty() {
        let mut all = vec![Backend::Cpu];
        if xsched_backend_opencl::devices().is_ok() {
            all.push(Backend::OpenCl);
        }
        all
    } else {
        a.backend
            .iter()
            .map(|&b| backend(b))
            .collect::<Result<_>>()?
    };
    Ok(crate::output::with_progress(|tick| probe::run(&p, tick))?)
}

fn backend(b: BackendName) -> Result<Backend> {
    match b {
        BackendName::Cpu => Ok(Backend::Cpu),
        BackendName::Opencl => match xsched_backend_opencl::devices() {
            Ok(_) => Ok(Backend::OpenCl),
            Err(e) => bail!("--backend opencl: the backend is absent: {e}"),
        },
        BackendName::Cuda => match xsched_backend_cuda::devices() {
            Err(e) => bail!("--backend cuda: the backend is absent: {e}"),
            Ok(_) => bail!(
                "--backend cuda: a CUDA device is present, but probing CUDA is not built yet \
                 (scripts/gpu-check.sh measures its preemption latency)"
            ),
        },
    }
}

/// Keep the table for `xsched devices`, and in `out` when asked.
fn save(table: &ProbeTable, out: Option<&Path>) -> Result<()> {
    let json = serde_json::to_string_pretty(table)? + "\n";
    if let Some(path) = last_probe_path() {
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &json));
        match written {
            Ok(()) => eprintln!("kept for `xsched devices` in {}", path.display()),
            Err(e) => eprintln!("warning: cannot keep the probe in {}: {e}", path.display()),
        }
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, text) in [("probe.json", json.clone()), ("probe.md", table.markdown())] {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The table as rows: one per backend, level and command length.
pub fn report(t: &ProbeTable) -> Report {
    let mut rows = Vec::new();
    for b in &t.backends {
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
    let runtimes: Vec<String> = t
        .backends
        .iter()
        .map(|b| format!("{}: {} ({})", b.backend, b.device, b.runtime))
        .collect();
    Report::new(
        format!("{}; {}", t.machine, runtimes.join("; ")),
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
