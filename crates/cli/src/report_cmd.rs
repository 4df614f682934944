//! `xsched report RUN.json -o report.html`, and writing the records it reads.

use anyhow::{Context, Result};
use std::path::Path;
use xsched_report::run::RunRecord;

/// Write `record` as pretty JSON to `path`.
pub fn write_record(path: &Path, record: &RunRecord) -> Result<()> {
    let text = serde_json::to_string_pretty(record).context("encoding the run's record")?;
    std::fs::write(path, text + "\n")
        .with_context(|| format!("writing the run's record to {}", path.display()))?;
    eprintln!("record written to {}", path.display());
    Ok(())
}

/// Read the record at `run` and write its page to `output`.
pub fn render(run: &Path, output: &Path) -> Result<()> {
    let text = std::fs::read_to_string(run)
        .with_context(|| format!("reading the run's record {}", run.display()))?;
    let record = xsched_report::run::parse(&text)
        .with_context(|| format!("{} is not a run record", run.display()))?;
    let page = xsched_report::html::render(&record).context("drawing the report's figures")?;
    std::fs::write(output, page).with_context(|| format!("writing {}", output.display()))?;
    eprintln!("report written to {}", output.display());
    Ok(())
}
