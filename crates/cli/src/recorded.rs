//! Recorded requests as the benchmark scripts write them (`scripts/llm/long-answers.py`,
//! `vllm-bench.py`): JSON lines with `output_tokens` and, where known, `prompt` (else empty),
//! `arrival` (seconds; else 0) and `input_tokens`. The replay runs them through the simulator; the gateway's
//! `--history-from` fills its predictor with their answers' lengths.

use anyhow::{Context, Result, bail};
use std::path::Path;

/// One recorded request and its answer's length.
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
pub fn read(path: &Path) -> Result<Vec<Recorded>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), k + 1);
        let v: serde_json::Value = serde_json::from_str(line).with_context(at)?;
        let tokens = |field: &str| {
            v.get(field)
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .with_context(|| format!("{}: `{field}` is not a token count", at()))
        };
        let arrival = v
            .get("arrival")
            .map_or(Some(0.0), serde_json::Value::as_f64);
        let Some(arrival) = arrival.filter(|t| t.is_finite() && *t >= 0.0) else {
            bail!("{}: `arrival` is not a time in seconds", at());
        };
        let prompt = match v.get("prompt") {
            None => "",
            Some(p) => match p.as_str() {
                Some(p) => p,
                None => bail!("{}: `prompt` is not a string", at()),
            },
        };
        out.push(Recorded {
            arrival,
            prompt: prompt.to_owned(),
            input_tokens: match v.get("input_tokens") {
                None => None,
                Some(_) => Some(tokens("input_tokens")?),
            },
            output_tokens: tokens("output_tokens")?,
        });
    }
    Ok(out)
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
            let e = read(file(text).path()).err().expect("refused");
            assert!(format!("{e:#}").contains(want), "{e:#} lacks {want}");
        }
    }
}
