//! Recorded requests as the benchmark scripts write them (`scripts/llm/long-answers.py`,
//! `vllm-bench.py`): JSON lines with `output_tokens` and, where known, `prompt` (else empty),
//! `arrival` (seconds; else 0) and `input_tokens`. The replay (`crate::replay`) runs them through
//! the simulator; the gateway's `--history-from` fills its predictor with their answers'
//! lengths. Both read the file here, by one rule, and every error names the file and the line.

use crate::LlmError;
use std::path::Path;

/// One recorded request and its answer's length.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// When it was sent (s; 0 when the file does not say).
    pub arrival: f64,
    /// The prompt (one user message; empty when the file has none).
    pub prompt: String,
    /// Its tokens, as the engine counted them, when the file says.
    pub input_tokens: Option<u32>,
    /// The answer's tokens.
    pub output_tokens: u32,
}

/// Every request of the file at `path`, in file order; an unreadable line is an error naming it.
pub fn read(path: &Path) -> Result<Vec<Recorded>, LlmError> {
    let text = std::fs::read_to_string(path).map_err(|source| LlmError::Read {
        path: path.to_owned(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(k, line)| parse_line(path, k + 1, line))
        .collect()
}

/// The request on line `line` (counted from 1) of the file at `path`, whose text is `text`.
fn parse_line(path: &Path, line: usize, text: &str) -> Result<Recorded, LlmError> {
    let bad = |field: &'static str, expected: &'static str| LlmError::RecordedField {
        path: path.to_owned(),
        line,
        field,
        expected,
    };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|source| LlmError::RecordedJson {
            path: path.to_owned(),
            line,
            source,
        })?;
    let tokens = |field: &'static str| {
        v.get(field)
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad(field, "a token count"))
    };
    let arrival = v
        .get("arrival")
        .map_or(Some(0.0), serde_json::Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| bad("arrival", "a time in seconds"))?;
    let prompt = match v.get("prompt") {
        None => "",
        Some(p) => p.as_str().ok_or_else(|| bad("prompt", "a string"))?,
    };
    let input_tokens = match v.get("input_tokens") {
        None => None,
        Some(_) => Some(tokens("input_tokens")?),
    };
    Ok(Recorded {
        arrival,
        prompt: prompt.to_owned(),
        input_tokens,
        output_tokens: tokens("output_tokens")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(f.path(), text).expect("write");
        f
    }

    #[test]
    fn lines_are_read_in_order_and_a_missing_arrival_is_zero() {
        let f = file(concat!(
            r#"{"arrival": 1.5, "prompt": "a", "input_tokens": 3, "output_tokens": 7}"#,
            "\n\n",
            r#"{"prompt": "b", "input_tokens": 4, "output_tokens": 9, "source": "x"}"#,
            "\n"
        ));
        let got = read(f.path()).expect("read");
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].arrival, got[0].prompt.as_str()), (1.5, "a"));
        assert_eq!(
            (got[1].arrival, got[1].input_tokens, got[1].output_tokens),
            (0.0, Some(4), 9)
        );
    }

    #[test]
    fn a_line_without_input_tokens_is_read_without_them() {
        let f = file(r#"{"prompt": "a", "output_tokens": 7}"#);
        let got = read(f.path()).expect("read");
        assert_eq!((got[0].input_tokens, got[0].output_tokens), (None, 7));
    }

    #[test]
    fn a_bad_line_is_named_with_its_field() {
        for (text, want) in [
            (
                r#"{"prompt": "a", "input_tokens": 3}"#,
                "line 1: `output_tokens`",
            ),
            (
                r#"{"prompt": "a", "input_tokens": -3, "output_tokens": 1}"#,
                "`input_tokens`",
            ),
            (
                r#"{"prompt": 5, "input_tokens": 3, "output_tokens": 1}"#,
                "`prompt`",
            ),
            (
                r#"{"arrival": -1, "prompt": "a", "input_tokens": 3, "output_tokens": 1}"#,
                "`arrival`",
            ),
            ("not json", "line 1"),
        ] {
            let e = read(file(text).path()).expect_err("refused");
            assert!(format!("{e:#}").contains(want), "{e:#} lacks {want}");
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = read(Path::new("/nonexistent/requests.jsonl")).expect_err("refused");
        assert_eq!(e.to_string(), "reading /nonexistent/requests.jsonl");
    }
}
