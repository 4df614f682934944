//! Tables, JSON and the progress bar.

use anyhow::Result;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};
use xsched_report::Report;
use xsched_sim::{Scenario, profile};

/// Run `job`, showing a progress bar once it has taken more than a second. The job reports
/// progress through the function it is given (`done`, `total`).
pub fn with_progress<T>(job: impl FnOnce(&(dyn Fn(usize, usize) + Sync)) -> T) -> T {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs")
    {
        bar.set_style(style);
    }
    let start = Instant::now();
    let tick = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if bar.is_hidden() && start.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    };
    let out = job(&tick);
    bar.finish_and_clear();
    out
}

/// Run a scenario with a progress bar.
pub fn run_with_progress(scenario: &Scenario) -> (Report, Vec<xsched_report::plot::Figure>) {
    with_progress(|tick| scenario.run_with_figures(tick))
}

/// Write `figures` into `dir` when one was asked for (`--plot DIR`), saying if `what` draws
/// none.
pub fn write_figures(
    dir: Option<&std::path::Path>,
    figures: &[xsched_report::plot::Figure],
    what: &str,
) -> Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    if figures.is_empty() {
        tracing::warn!("{what}: draws no figures");
    }
    for f in figures {
        let path = f.write(dir)?;
        tracing::info!("wrote {}", path.display());
    }
    Ok(())
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Print a report as a table (rows, then checks) or one JSON document.
pub fn print_report(title: &str, report: &Report, json: bool) -> Result<()> {
    print!("{}", render_report(title, report, json)?);
    Ok(())
}

/// The text [`print_report`] prints.
fn render_report(title: &str, report: &Report, json: bool) -> Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(&report.document(title))? + "\n");
    }
    let mut out = format!("{title} ({})\n", report.experiment);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(&report.columns);
    for r in &report.rows {
        t.add_row(
            report
                .columns
                .iter()
                .map(|c| r.get(c).map_or("-".into(), cell)),
        );
    }
    out.push_str(&format!("{t}\n"));
    if !report.checks.is_empty() {
        let mut c = Table::new();
        c.load_preset(UTF8_FULL_CONDENSED);
        c.set_header(["check", "target", "measured", "verdict"]);
        for k in &report.checks {
            c.add_row([
                k.name.as_str(),
                k.target.as_str(),
                k.measured.as_str(),
                k.verdict.word(),
            ]);
        }
        out.push_str(&format!("{c}\n{}\n", report.summary()));
    }
    Ok(out)
}

/// A real backend this build has: key, description, capability table, and whether it can be
/// used here.
struct Backend {
    key: String,
    name: String,
    available: bool,
    caps: xsched_core::Capabilities,
}

/// The real backends of this build: the CPU device, each OpenCL device and each CUDA device (or
/// one absent row per backend saying why, when its library, driver or devices are missing).
fn backends() -> Vec<Backend> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut all = vec![Backend {
        key: "cpu".into(),
        name: format!("built-in CPU device ({cpus} hardware threads here; workers configurable)"),
        available: true,
        caps: xsched_backend_cpu::CpuDevice::capabilities(),
    }];
    match xsched_backend_opencl::devices() {
        Ok(devices) => all.extend(devices.into_iter().enumerate().map(|(i, d)| Backend {
            key: format!("opencl:{i}"),
            name: format!("{} ({})", d.name, d.platform),
            available: true,
            caps: xsched_backend_opencl::capabilities(d.cpu),
        })),
        Err(e) => all.push(Backend {
            key: "opencl".into(),
            name: format!("absent: {e}"),
            available: false,
            caps: xsched_backend_opencl::capabilities(false),
        }),
    }
    match xsched_backend_cuda::devices() {
        Ok(devices) => all.extend(devices.into_iter().map(|d| Backend {
            key: format!("cuda:{}", d.ordinal),
            name: d.name,
            available: true,
            caps: xsched_backend_cuda::capabilities(d.stream_memops),
        })),
        Err(e) => all.push(Backend {
            key: "cuda".into(),
            name: format!("absent: {e}"),
            available: false,
            caps: xsched_backend_cuda::capabilities(true),
        }),
    }
    all
}

/// Print each available backend's capability table, then the simulated profiles, then the
/// figures of the last `xsched probe` on this machine, if one was kept.
pub fn print_devices(json: bool) -> Result<()> {
    let all = profile::all();
    let real = backends();
    let probe = last_probe();
    if json {
        let mut doc: Vec<serde_json::Value> = real
            .iter()
            .map(|b| {
                let backend = b.key.split(':').next().unwrap_or_default();
                // The last probe's figures for this device (a probe measures a backend's first),
                // if it was taken on this machine.
                let first = b.key == backend || b.key == format!("{backend}:0");
                let probed = probe.as_ref().and_then(|(_, t)| {
                    t.backends.iter().find(|p| {
                        b.available
                            && first
                            && p.backend == backend
                            && (backend == "cpu" || b.name.starts_with(&p.device))
                            && t.machine == xsched_bench::probe::machine()
                    })
                });
                serde_json::json!({
                    "backend": backend,
                    "key": b.key,
                    "name": b.name,
                    "available": b.available,
                    "capabilities": b.caps,
                    "probe": probed,
                })
            })
            .collect();
        doc.extend(all.iter().map(|p| {
            serde_json::json!({
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
    for b in &real {
        t.add_row([
            b.key.split(':').next().unwrap_or_default().to_string(),
            b.key.clone(),
            b.name.clone(),
            b.caps.max_level.to_string(),
            b.caps.native_arbitration.clone(),
            b.caps.preemption_unit.clone(),
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
        Some((path, table)) if table.machine == xsched_bench::probe::machine() => {
            println!("\nLast probe ({}):", path.display());
            print_report("probe", &crate::probe_cmd::report(&table), false)?;
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
fn last_probe() -> Option<(std::path::PathBuf, xsched_bench::probe::ProbeTable)> {
    let path = crate::probe_cmd::last_probe_path()?;
    if !path.exists() {
        return None;
    }
    match crate::probe_cmd::read_table(&path) {
        Ok(table) => Some((path, table)),
        Err(e) => {
            eprintln!("warning: the last probe is unusable (probe again): {e:#}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xsched_report::{Check, Verdict, columns};

    #[test]
    fn a_reported_figure_is_shown_as_reported_never_as_met() {
        let check = |name: &str, verdict| Check {
            name: name.into(),
            target: if verdict == Verdict::Reported {
                "none".into()
            } else {
                ">= 2x".into()
            },
            measured: "1.5x".into(),
            verdict,
        };
        let report = Report::new("x", columns(&["a"]), Vec::new()).with_checks(vec![
            check("gain", Verdict::Met),
            check("gap to the oracle", Verdict::Reported),
        ]);
        let text = render_report("t", &report, false).expect("renders");
        let line = |name: &str| {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no {name} row in\n{text}"))
                .to_string()
        };
        assert!(line("gap to the oracle").contains("reported"), "{text}");
        assert!(!line("gap to the oracle").contains("met"), "{text}");
        assert!(line("gain").contains("met"), "{text}");
        assert!(
            text.contains("1 of 1 targets met, 1 figure reported"),
            "{text}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render_report("t", &report, true).expect("renders"))
                .expect("one JSON document");
        assert_eq!(json["checks"][1]["verdict"], "reported", "{json}");
    }
}
