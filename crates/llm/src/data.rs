//! Reading `../shared/data/llm` in place: prompt files (JSON lines) with real responses.
//!
//! Token counts come from a documented words → tokens factor ([`TOKENS_PER_WORD`], the usual
//! ≈ 4/3 BPE tokens per English word), applied to whitespace-separated words of the prompt and
//! of the real response; results say so. Malformed lines are reported with file and line and
//! skipped, or rejected when `strict`.

use crate::LlmError;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Tokens per whitespace-separated word (a documented approximation of a BPE tokenizer).
pub const TOKENS_PER_WORD: f64 = 4.0 / 3.0;

/// Why one line of a prompt file could not be read (the message a malformed line reports).
#[derive(Debug, Error)]
pub(crate) enum LineError {
    /// The line is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A field is missing or not a string.
    #[error("field `{0}` missing or not a string")]
    Field(String),
}

/// One prompt with a real response's length.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptRecord {
    /// The prompt id (shared by the models answering it).
    pub prompt_id: String,
    /// The model that answered.
    pub model: String,
    /// The prompt text.
    pub prompt: String,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Response tokens.
    pub output_tokens: u32,
    /// Tokens of the conversation's latest answer before this prompt, when the prompt
    /// continues a conversation (ShareGPT's later turns; `None` for single prompts).
    pub previous_answer_tokens: Option<u32>,
    /// The conversation the prompt belongs to (ShareGPT's record id; `None`: a prompt of its
    /// own). Splits keep a conversation's turns together ([`shuffle_by_conversation`]).
    pub conversation: Option<String>,
}

/// `records` in a seeded random order of whole conversations, each conversation's turns
/// in their own order (a record without a conversation is one by itself). A split of the
/// result keeps every conversation on one side but the one it cuts, and that one's earlier
/// turns go first, as earlier traffic would: a history warmed from the first part never holds
/// a sibling turn from the future of a request it predicts.
pub fn shuffle_by_conversation(records: &[PromptRecord], seed: u64) -> Vec<&PromptRecord> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut groups: Vec<Vec<&PromptRecord>> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in records {
        match r.conversation.as_deref() {
            Some(c) => {
                let g = *index.entry(c).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(r);
            }
            None => groups.push(vec![r]),
        }
    }
    groups.shuffle(&mut rand_pcg::Pcg64Mcg::seed_from_u64(seed));
    groups.into_iter().flatten().collect()
}

/// Tokens of a text by the documented factor (at least 1).
pub fn tokens(text: &str) -> u32 {
    let words = text.split_whitespace().count() as f64;
    ((words * TOKENS_PER_WORD).ceil() as u32).max(1)
}

/// What a prompt file yielded.
#[derive(Debug)]
pub struct Loaded {
    /// The records matching the filter.
    pub records: Vec<PromptRecord>,
    /// `file:line: message` of each skipped malformed line.
    pub skipped: Vec<String>,
    /// Records dropped because their prompt text was already kept (some files answer a prompt
    /// twice under one model name, e.g. arena-hard's GPT-4 and its GPT-4 reference): a prompt
    /// appears once in a workload.
    pub duplicates: usize,
}

/// Read a prompt file, keeping records of `model` (all models when `None`); with a model, each
/// prompt text is kept once (the first answer).
pub fn load_prompts(path: &Path, model: Option<&str>, strict: bool) -> Result<Loaded, LlmError> {
    let (all, skipped) = parse_lines(path, 0, strict, parse_line)?;
    let mut records = Vec::new();
    let mut models = std::collections::BTreeSet::new();
    let mut prompts_kept = std::collections::HashSet::new();
    let mut duplicates = 0;
    for r in all {
        models.insert(r.model.clone());
        match model {
            None => records.push(r),
            Some(m) if m == r.model => {
                if prompts_kept.insert(r.prompt.clone()) {
                    records.push(r);
                } else {
                    duplicates += 1;
                }
            }
            Some(_) => {}
        }
    }
    if records.is_empty()
        && let Some(m) = model
    {
        return Err(LlmError::NoSuchModel {
            path: path.to_path_buf(),
            model: m.to_string(),
            known: models.into_iter().collect::<Vec<_>>().join(", "),
        });
    }
    Ok(Loaded {
        records,
        skipped,
        duplicates,
    })
}

/// Parse every non-empty line of `path` after the first `header` lines with `parse`; a line
/// that fails is rejected (`strict`: the error names file and line) or skipped and reported
/// as `file:line: message`.
fn parse_lines<T, E: std::fmt::Display>(
    path: &Path,
    header: usize,
    strict: bool,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<(Vec<T>, Vec<String>), LlmError> {
    parse_text(path, &read_text(path)?, header, strict, parse)
}

/// The text of `path`.
pub(crate) fn read_text(path: &Path) -> Result<String, LlmError> {
    std::fs::read_to_string(path).map_err(|source| LlmError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// [`parse_lines`] on `text`, already read from `path`.
pub(crate) fn parse_text<T, E: std::fmt::Display>(
    path: &Path,
    text: &str,
    header: usize,
    strict: bool,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<(Vec<T>, Vec<String>), LlmError> {
    let mut parsed = Vec::new();
    let mut skipped = Vec::new();
    for (i, line) in text.lines().enumerate().skip(header) {
        if line.trim().is_empty() {
            continue;
        }
        match parse(line) {
            Ok(v) => parsed.push(v),
            Err(message) if strict => {
                return Err(LlmError::Malformed {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: message.to_string(),
                });
            }
            Err(message) => skipped.push(format!("{}:{}: {message}", path.display(), i + 1)),
        }
    }
    Ok((parsed, skipped))
}

fn parse_line(line: &str) -> Result<PromptRecord, LineError> {
    let v: serde_json::Value = serde_json::from_str(line)?;
    let field = |name: &str| {
        v.get(name)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| LineError::Field(name.to_string()))
    };
    let prompt = field("prompt")?;
    let response = field("response")?;
    Ok(PromptRecord {
        prompt_id: field("prompt_id")?.to_string(),
        model: field("model")?.to_string(),
        prompt: prompt.to_string(),
        input_tokens: tokens(prompt),
        output_tokens: tokens(response),
        previous_answer_tokens: None,
        conversation: None,
    })
}

/// The data directory: `XSCHED_DATA_DIR`, else `../shared/data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("XSCHED_DATA_DIR")
        .map_or_else(|| PathBuf::from("../shared/data"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_name_file_and_line() {
        let dir = std::env::temp_dir().join(format!("xsched-llm-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p.jsonl");
        let good = r#"{"source":"s","model":"m","prompt_id":"1","prompt":"a b c","response":"x y z w v u"}"#;
        let again =
            r#"{"source":"s","model":"m","prompt_id":"1r","prompt":"a b c","response":"x"}"#;
        std::fs::write(
            &path,
            format!("{good}\nnot json\n{{\"model\":\"m\"}}\n{again}\n"),
        )
        .expect("write");
        let loaded = load_prompts(&path, Some("m"), false).expect("lenient");
        assert_eq!(loaded.records.len(), 1, "the repeated prompt is kept once");
        assert_eq!(loaded.duplicates, 1);
        assert_eq!(loaded.records[0].input_tokens, 4);
        assert_eq!(loaded.records[0].output_tokens, 8);
        assert_eq!(loaded.skipped.len(), 2);
        assert!(
            loaded.skipped[0].contains("p.jsonl:2"),
            "{:?}",
            loaded.skipped
        );
        let err = load_prompts(&path, Some("m"), true).expect_err("strict");
        assert!(err.to_string().contains("p.jsonl:2"), "{err}");
        let err = load_prompts(&path, Some("other"), false).expect_err("no such model");
        assert!(err.to_string().contains("models there: m"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
