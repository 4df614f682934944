//! Arrival times from a user's trace file (`xsched llm --trace FILE`): the shape of their
//! traffic, scaled like the Azure traces to each load's rate.
//!
//! Two formats, told apart by the first non-empty line:
//! - **CSV** with a header: the time column is the first whose name is `timestamp`, `time`,
//!   `arrival`, `arrival_time`, `ts` or `t`, optionally with a unit suffix (`_s`, `_ms`,
//!   `_us`); values are numbers or `YYYY-MM-DD HH:MM:SS[.f]` date-times (Azure's format).
//! - **JSON lines**: each line an object with a `timestamp` field (a number or such a
//!   date-time string).
//!
//! The unit of numbers: the column's suffix if it has one (`timestamp_ms`), else the one asked
//! for (`--trace-unit`), else seconds. Date-times are always seconds. Times are sorted and made
//! relative to the first. A line whose time cannot be read is an error naming the file and line
//! (`strict`) or is skipped and reported; a file without a usable time column is an error
//! naming the file and its header line.

use crate::LlmError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The unit of a trace's numeric times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
}

impl Unit {
    fn seconds(self) -> f64 {
        match self {
            Unit::Seconds => 1.0,
            Unit::Millis => 1e-3,
            Unit::Micros => 1e-6,
        }
    }

    /// The unit a column's name ends with, if any.
    fn of_suffix(name: &str) -> Option<Unit> {
        [
            ("_ms", Unit::Millis),
            ("_us", Unit::Micros),
            ("_s", Unit::Seconds),
        ]
        .into_iter()
        .find_map(|(suffix, unit)| name.ends_with(suffix).then_some(unit))
    }
}

/// Column names taken as the time (before any unit suffix).
const TIME_NAMES: &[&str] = &["timestamp", "time", "arrival", "arrival_time", "ts", "t"];

/// Why a line of a trace could not be read: its header or one arrival (the message a malformed
/// line reports).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TraceLineError {
    /// The CSV header names no time column.
    #[error(
        "no time column in the header `{header}` (want one of {names}, optionally with _s, _ms or _us)",
        names = TIME_NAMES.join(", ")
    )]
    NoTimeColumn {
        /// The header line.
        header: String,
    },
    /// A JSON line is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A JSON line's `timestamp` is a number that is not a finite `f64`.
    #[error("field `timestamp` is not a finite number")]
    TimestampNotFinite,
    /// A JSON line has no usable `timestamp`.
    #[error("field `timestamp` missing (a number or a date-time string)")]
    TimestampMissing,
    /// A time is a number but not finite.
    #[error("time `{0}` is not finite")]
    NotFinite(String),
    /// A time is neither a number nor a date-time.
    #[error("time `{0}` is neither a number nor `YYYY-MM-DD HH:MM:SS.f`")]
    NotATime(String),
}

/// What a trace file gave.
#[derive(Debug)]
pub struct Trace {
    /// Seconds since the first arrival, ascending.
    pub times: Vec<f64>,
    /// `file:line: message` of each skipped line.
    pub skipped: Vec<String>,
    /// How the unit was chosen, for the report.
    pub unit: String,
}

/// The Azure LLM inference traces of 2023 in the data directory ([`data_dir`](crate::data::data_dir)),
/// by the names `xsched llm` takes.
pub const NAMED: &[(&str, &str)] = &[
    ("azure-conv", "llm/trace-azure-conv-2023.csv"),
    ("azure-code", "llm/trace-azure-code-2023.csv"),
];

/// The file of the trace named `name` ([`NAMED`]); any other name is a file's path.
pub fn path_of(name: &str) -> PathBuf {
    match NAMED.iter().find(|(n, _)| *n == name) {
        Some((_, file)) => crate::data::data_dir().join(file),
        None => PathBuf::from(name),
    }
}

impl Trace {
    /// The gaps between its arrivals, in order, scaled so their mean rate is `rate` a second
    /// (`None`: fewer than two distinct arrivals, or a rate that is not a positive number).
    pub fn gaps_at(&self, rate: f64) -> Option<Vec<f64>> {
        let gaps: Vec<f64> = self.times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
        if !(mean > 0.0 && mean.is_finite() && rate > 0.0 && rate.is_finite()) {
            return None;
        }
        let scale = 1.0 / (rate * mean);
        Some(gaps.iter().map(|g| g * scale).collect())
    }
}

/// Read a trace file (see the module docs); `asked` is the unit for unsuffixed numbers.
pub fn load(path: &Path, asked: Option<Unit>, strict: bool) -> Result<Trace, LlmError> {
    let text = crate::data::read_text(path)?;
    let malformed = |line: usize, message: String| LlmError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((first_line, first)) = lines.next() else {
        return Err(malformed(1, "empty trace: no arrivals".into()));
    };
    let json = first.starts_with('{');
    let (column, unit, how) = if json {
        let unit = asked.unwrap_or(Unit::Seconds);
        (
            0,
            unit,
            format!("JSON `timestamp` in {unit:?} (asked or default)"),
        )
    } else {
        csv_column(first, asked).map_err(|e| malformed(first_line, e.to_string()))?
    };
    // The lines after the header (JSON lines have none): the shared parser names file and line.
    let header = if json { first_line - 1 } else { first_line };
    let (mut times, skipped) = crate::data::parse_text(path, &text, header, strict, |l| {
        let l = l.trim();
        let parsed = if json {
            json_time(l)
        } else {
            let field = l.split(',').nth(column).unwrap_or_default();
            value_time(field.trim().trim_matches('"'))
        };
        parsed.map(|t| match t {
            Time::Number(x) => x * unit.seconds(),
            Time::DateTime(s) => s,
        })
    })?;
    if times.len() < 2 {
        return Err(malformed(
            first_line,
            format!(
                "fewer than two readable arrivals ({} skipped)",
                skipped.len()
            ),
        ));
    }
    times.sort_by(f64::total_cmp);
    let start = times[0];
    times.iter_mut().for_each(|t| *t -= start);
    Ok(Trace {
        times,
        skipped,
        unit: how,
    })
}

/// The time column of a CSV header line `first`, its unit (`asked` for an unsuffixed name) and
/// how the unit was chosen; else the error.
fn csv_column(first: &str, asked: Option<Unit>) -> Result<(usize, Unit, String), TraceLineError> {
    let names: Vec<String> = first
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let Some(column) = names.iter().position(|n| {
        let base = Unit::of_suffix(n).map_or(n.as_str(), |_| {
            n.rsplit_once('_').map_or(n.as_str(), |(b, _)| b)
        });
        TIME_NAMES.contains(&base) || TIME_NAMES.contains(&n.as_str())
    }) else {
        return Err(TraceLineError::NoTimeColumn {
            header: first.to_string(),
        });
    };
    let name = &names[column];
    if let Some(u) = Unit::of_suffix(name).filter(|_| !TIME_NAMES.contains(&name.as_str())) {
        return Ok((column, u, format!("column `{name}` in {u:?} (its suffix)")));
    }
    let u = asked.unwrap_or(Unit::Seconds);
    Ok((
        column,
        u,
        format!("column `{name}` in {u:?} (asked or default)"),
    ))
}

enum Time {
    Number(f64),
    /// Already seconds.
    DateTime(f64),
}

fn json_time(line: &str) -> Result<Time, TraceLineError> {
    let v: Value = serde_json::from_str(line)?;
    match v.get("timestamp") {
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Time::Number)
            .ok_or(TraceLineError::TimestampNotFinite),
        Some(Value::String(s)) => value_time(s),
        _ => Err(TraceLineError::TimestampMissing),
    }
}

fn value_time(field: &str) -> Result<Time, TraceLineError> {
    if let Ok(x) = field.parse::<f64>() {
        return if x.is_finite() {
            Ok(Time::Number(x))
        } else {
            Err(TraceLineError::NotFinite(field.to_string()))
        };
    }
    datetime_seconds(field).map(Time::DateTime)
}

/// Seconds of a `YYYY-MM-DD HH:MM:SS[.f]` date-time since the start of its month's day 0 (days
/// counted from the day number, so a trace may cross midnight, not a month's end).
fn datetime_seconds(stamp: &str) -> Result<f64, TraceLineError> {
    let bad = || TraceLineError::NotATime(stamp.to_string());
    let (date, time) = stamp.split_once(' ').ok_or_else(bad)?;
    let day: f64 = date
        .rsplit('-')
        .next()
        .and_then(|d| d.parse().ok())
        .ok_or_else(bad)?;
    let mut hms = time.split(':').map(str::parse::<f64>);
    let (Some(Ok(h)), Some(Ok(m)), Some(Ok(sec)), None) =
        (hms.next(), hms.next(), hms.next(), hms.next())
    else {
        return Err(bad());
    };
    Ok(day * 86_400.0 + h * 3600.0 + m * 60.0 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xsched-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn gaps_keep_their_order_scaled_to_the_rate_and_names_find_the_azure_traces() {
        let t = Trace {
            times: vec![0.0, 1.0, 4.0, 4.0],
            skipped: Vec::new(),
            unit: String::new(),
        };
        // Mean gap 4/3 s: at 3 a second each is scaled by 1/(3·4/3) = 1/4.
        assert_eq!(t.gaps_at(3.0), Some(vec![0.25, 0.75, 0.0]));
        assert_eq!(t.gaps_at(0.0), None);
        let one = Trace {
            times: vec![2.0, 2.0],
            ..t
        };
        assert_eq!(one.gaps_at(1.0), None, "no distinct arrivals");
        assert!(path_of("azure-code").ends_with("llm/trace-azure-code-2023.csv"));
        assert_eq!(path_of("my.csv"), PathBuf::from("my.csv"));
    }

    #[test]
    fn csv_columns_units_and_datetimes() {
        let ms = write(
            "ms.csv",
            "id,timestamp_ms,tokens\n1,2500,7\n2,1000,3\n3,4000,1\n",
        );
        let t = load(&ms, None, true).expect("ms");
        assert_eq!(t.times, vec![0.0, 1.5, 3.0]);
        assert!(t.unit.contains("suffix"), "{}", t.unit);
        let plain = write("s.csv", "Time,x\n10,1\n12.5,1\n");
        assert_eq!(load(&plain, None, true).expect("s").times, vec![0.0, 2.5]);
        let asked = load(&plain, Some(Unit::Millis), true).expect("asked").times;
        assert!((asked[1] - 0.0025).abs() < 1e-15, "{asked:?}");
        let azure = write(
            "azure.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 23:59:59.5,374,44\nyesterday,1,1\n2023-11-17 00:00:01.25,396,109\n",
        );
        let t = load(&azure, None, false).expect("azure");
        assert_eq!(t.times, vec![0.0, 1.75], "crosses midnight");
        assert!(
            t.skipped[0].contains("azure.csv:3: time `yesterday`"),
            "{:?}",
            t.skipped
        );
    }

    #[test]
    fn json_lines_and_bad_lines_name_file_and_line() {
        let j = write(
            "t.jsonl",
            "{\"timestamp\": 3.0}\n{\"timestamp\": \"soon\"}\n{\"timestamp\": 1.0}\n",
        );
        let err = load(&j, None, true).expect_err("strict");
        assert!(err.to_string().contains("t.jsonl:2"), "{err}");
        let t = load(&j, None, false).expect("lenient");
        assert_eq!(t.times, vec![0.0, 2.0]);
        assert_eq!(t.skipped.len(), 1);
        let none = write("none.csv", "id,tokens\n1,2\n");
        let err = load(&none, None, false).expect_err("no time column");
        assert!(
            err.to_string().contains("none.csv:1: no time column"),
            "{err}"
        );
    }
}
