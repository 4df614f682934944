//! Where in a TOML text a problem sits: line, column and field. Scenario files and device
//! profiles are both TOML read strictly, and an error in either names its place.

use std::ops::Range;

/// A problem at a place in a TOML text.
#[derive(Debug)]
pub(crate) struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, naming the field.
    pub message: String,
}

impl Place {
    /// `message` at byte `span.start` of `src` (its start without a span). serde's value errors
    /// do not say which field; the key on that line does. For scenario files, whose fields are
    /// all top-level keys.
    pub(crate) fn of(src: &str, span: Option<Range<usize>>, message: &str) -> Place {
        let (line, column, key) = locate(src, span);
        let message = match key {
            Some(k) if !message.contains("field") => format!("field `{k}`: {message}"),
            _ => message.to_string(),
        };
        Place {
            line,
            column,
            message,
        }
    }

    /// As [`Place::of`], the key named under the `[table]` it sits in. For device profile
    /// files, whose fields are spread over tables.
    pub(crate) fn in_tables(src: &str, span: Option<Range<usize>>, message: &str) -> Place {
        let start = span.as_ref().map_or(0, |s| s.start).min(src.len());
        let (line, column, key) = locate(src, span);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let table = src[..line_end].lines().rev().find_map(table_header);
        let message = match (key, table) {
            (Some(k), Some(t)) if !message.contains("field") => {
                format!("field `{t}.{k}`: {message}")
            }
            (Some(k), None) if !message.contains("field") => format!("field `{k}`: {message}"),
            (_, Some(t)) => format!("in `[{t}]`: {message}"),
            _ => message.to_string(),
        };
        Place {
            line,
            column,
            message,
        }
    }
}

/// The 1-based line and column of byte `span.start` of `src` (its start without a span), and
/// the key assigned on that line, if any.
fn locate(src: &str, span: Option<Range<usize>>) -> (usize, usize, Option<&str>) {
    let start = span.map_or(0, |s| s.start).min(src.len());
    let before = &src[..start];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before.len() - line_start + 1;
    let key = src[line_start..]
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.contains('\n') && !k.starts_with('['));
    (line, column, key)
}

/// The table a line opens (`[fg.cmd_min]` opens `fg.cmd_min`), if it is a table header: at the
/// start of the line, alone there but for a comment (not a line of a multi-line array).
fn table_header(line: &str) -> Option<&str> {
    let (name, rest) = line
        .strip_prefix('[')?
        .trim_start_matches('[')
        .split_once(']')?;
    let rest = rest.trim_start_matches(']').trim();
    (!name.contains(',') && (rest.is_empty() || rest.starts_with('#'))).then(|| name.trim())
}
