//! `xsched probe` and `xsched devices`: their arguments and what they print. Measuring,
//! discovering devices and keeping the table are `xsched-probe`'s.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xsched_probe::{Backend, ProbeParams, ProbeTable, Tolerance, devices, store};
use xsched_report::{Report, cells, columns};
use xsched_sim::profile;

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

/// xsched's cache directory, where the last probe is kept for `xsched devices`.
fn cache_dir() -> Option<PathBuf> {
    store::default_dir()
}

/// Read a table, naming the file in any error.
fn read_table(path: &Path) -> Result<ProbeTable> {
    Ok(store::read(path)?)
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
        crate::output::print_report("probe", &table.report(), false)?;
    }
    let Some(old) = old else { return Ok(()) };
    let tolerance = Tolerance {
        fraction: a.threshold,
        tail_fraction: a.tail_threshold,
        floor_us: a.floor_us,
    };
    let regressions = xsched_probe::compare(&old, &table, tolerance);
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
    let asked: Vec<Backend> = a.backend.iter().map(|&b| backend(b)).collect();
    let names: Vec<&str> = asked.iter().map(|b| b.name()).collect();
    let p = p
        .with_backends(&asked)
        .with_context(|| format!("--backend {}", names.join(",")))?;
    Ok(crate::output::with_progress(|tick| {
        xsched_probe::run(&p, tick)
    })?)
}

fn backend(b: BackendName) -> Backend {
    match b {
        BackendName::Cpu => Backend::Cpu,
        BackendName::Opencl => Backend::OpenCl,
        BackendName::Cuda => Backend::Cuda,
    }
}

/// Keep the table for `xsched devices`, and in `out` when asked.
fn save(table: &ProbeTable, out: Option<&Path>) -> Result<()> {
    if let Some(cache) = cache_dir() {
        match store::keep(table, &cache) {
            Ok(path) => eprintln!("kept for `xsched devices` in {}", path.display()),
            Err(e) => eprintln!(
                "warning: cannot keep the probe: {:#}",
                anyhow::Error::new(e)
            ),
        }
    }
    if let Some(dir) = out {
        for path in store::write_out(table, dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Print each real device's capability table, then the simulated profiles, then the figures of
/// the last `xsched probe` on this machine, if one was kept.
pub fn devices(json: bool) -> Result<()> {
    let all = profile::all();
    let real = devices::discover();
    let probe = last_probe();
    if json {
        let mut doc: Vec<serde_json::Value> = real
            .iter()
            .map(|d| {
                json!({
                    "backend": d.backend(),
                    "key": d.key,
                    "name": d.name,
                    "available": d.available,
                    "capabilities": d.caps,
                    "probe": probe.as_ref().and_then(|(_, t)| d.probed(t)),
                })
            })
            .collect();
        doc.extend(all.iter().map(|p| {
            json!({
                "backend": "sim",
                "key": p.key,
                "name": p.name,
                "available": true,
                "capabilities": p.capabilities(),
                "profile": p,
            })
        }));
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "backend",
        "device",
        "name",
        "max level",
        "native arbitration",
        "preemption unit",
    ]);
    for d in &real {
        t.add_row([
            d.backend().to_string(),
            d.key.clone(),
            d.name.clone(),
            d.caps.max_level.to_string(),
            d.caps.native_arbitration.clone(),
            d.caps.preemption_unit.clone(),
        ]);
    }
    for p in &all {
        let c = p.capabilities();
        t.add_row([
            "sim".to_string(),
            p.key.to_string(),
            p.name.to_string(),
            c.max_level.to_string(),
            c.native_arbitration,
            c.preemption_unit,
        ]);
    }
    println!("{t}");
    match probe {
        Some((path, table)) if table.machine == xsched_probe::machine() => {
            println!("\nLast probe ({}):", path.display());
            crate::output::print_report("probe", &table.report(), false)?;
        }
        Some((path, table)) => println!(
            "\nThe last probe ({}) was taken on another machine ({}): `xsched probe` measures \
             this one.",
            path.display(),
            table.machine
        ),
        None => println!("\nNo probe kept yet: `xsched probe` measures this machine's backends."),
    }
    Ok(())
}

/// The last probe kept, if any; a kept file that cannot be read is said, not skipped silently.
fn last_probe() -> Option<(PathBuf, ProbeTable)> {
    match store::last(&cache_dir()?) {
        Ok(last) => last,
        Err(e) => {
            eprintln!(
                "warning: the last probe is unusable (probe again): {:#}",
                anyhow::Error::new(e)
            );
            None
        }
    }
}
