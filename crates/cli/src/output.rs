//! Tables, JSON and the progress bar.

use anyhow::Result;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};
use xsched_report::Report;
use xsched_sim::Scenario;

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
