//! What the gateway checks of a request before it queues it: that the body is JSON of the
//! endpoint's shape, as far as scheduling needs it. Everything else passes through unchanged for
//! the engine to judge. A malformed request gets a 400 whose message names the field.
//!
//! What the predictor needs is read on the way: the text the answer responds to (a chat's last
//! user message, or a completion's prompt), the length of the whole context, and the previous
//! answer in the conversation (the last assistant message before it), whose length predicts
//! this one's.

use crate::prefix::Blocks;
use serde_json::Value;
use xsched_llm_core::prefix::Prefix;

/// An endpoint the gateway schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completions,
}

/// What scheduling needs of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Whether the client asked for a stream of server-sent events.
    pub stream: bool,
    /// The requested output bound, if any (`max_completion_tokens` or `max_tokens`, the smaller
    /// if both).
    pub max_tokens: Option<u64>,
    /// The text the answer responds to: a chat's last user message (every message's text if it
    /// has none), or a completion's prompt (its strings joined).
    pub prompt: String,
    /// Characters of the whole context: every message's text, or the whole prompt.
    pub context_chars: usize,
    /// Characters of the conversation's previous answer (the last assistant message before the
    /// last user message), if there is one.
    pub previous_answer_chars: Option<usize>,
    /// Answers asked for (`n`, 1 by default).
    pub choices: u64,
    /// The body's `priority` (vLLM's field: lower wins), if any.
    pub priority: Option<i64>,
    /// Whether the body asks the engine to ignore end-of-sequence (`ignore_eos`, llama.cpp's
    /// and vLLM's field): the answer is then as long as its bound.
    pub ignore_eos: bool,
    /// The whole context's block hashes (`prefix.rs`), for the `prefix-affinity` router
    /// (empty unless asked for: `check_hashing`).
    pub prefix: Prefix,
}

impl Checked {
    /// The output bound in tokens, as the scheduler takes it (saturated at `u32::MAX`).
    pub fn output_bound(&self) -> Option<u32> {
        self.max_tokens
            .map(|m| u32::try_from(m).unwrap_or(u32::MAX))
    }

    /// The answer's length when the request states it: `ignore_eos` with an output bound (how
    /// benchmarks make a small model answer at a recorded length).
    pub fn stated_length(&self) -> Option<u32> {
        self.output_bound().filter(|_| self.ignore_eos)
    }
}

/// Why a request was refused: the field and what it must be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub(crate) struct Invalid {
    /// The field (`body` for the body as a whole).
    pub field: &'static str,
    /// What it must be.
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid {
        field,
        reason: reason.into(),
    }
}

/// Check `body` for `endpoint`.
#[cfg(test)]
pub(crate) fn check(endpoint: Endpoint, body: &[u8]) -> Result<Checked, Invalid> {
    check_hashing(endpoint, body, false)
}

/// The same, hashing the context's blocks when `prefix` (what only `prefix-affinity` reads:
/// other routers pay nothing for it).
pub(crate) fn check_hashing(
    endpoint: Endpoint,
    body: &[u8],
    prefix: bool,
) -> Result<Checked, Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| invalid("body", format!("not JSON ({e})")))?;
    let Value::Object(fields) = value else {
        return Err(invalid("body", "expected a JSON object"));
    };
    let (prompt, context_chars, previous_answer_chars, prefix) =
        context(endpoint, &fields, prefix)?;
    if let Some(m) = fields.get("model")
        && !m.is_string()
    {
        return Err(invalid("model", "expected a string"));
    }
    let stream = match fields.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("stream", "expected true or false")),
    };
    let max_tokens = output_bound(&fields)?;
    let choices = match fields.get("n") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or_else(|| invalid("n", "expected a whole number >= 1"))?,
    };
    let priority = match fields.get("priority") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| invalid("priority", "expected an integer (lower wins)"))?,
        ),
    };
    // Only `true` states a length; anything else is the engine's to judge.
    let ignore_eos = fields.get("ignore_eos") == Some(&Value::Bool(true));
    Ok(Checked {
        endpoint,
        stream,
        max_tokens,
        prompt,
        context_chars,
        previous_answer_chars,
        choices,
        priority,
        ignore_eos,
        prefix,
    })
}

/// A chat's messages or a completion's prompt: the prompt's text, the context's characters,
/// the previous answer's characters and the context's block hashes (when `prefix`).
fn context(
    endpoint: Endpoint,
    fields: &serde_json::Map<String, Value>,
    prefix: bool,
) -> Result<(String, usize, Option<usize>, Prefix), Invalid> {
    match endpoint {
        Endpoint::Chat => match fields.get("messages") {
            Some(Value::Array(m)) if !m.is_empty() => {
                if let Some(i) = m.iter().position(|v| !v.is_object()) {
                    return Err(invalid("messages", format!("item {i} is not an object")));
                }
                Ok(conversation(m, prefix))
            }
            Some(Value::Array(_)) => Err(invalid("messages", "must not be empty")),
            Some(_) => Err(invalid("messages", "expected an array of messages")),
            None => Err(invalid("messages", "missing")),
        },
        Endpoint::Completions => match fields.get("prompt") {
            Some(p @ (Value::String(_) | Value::Array(_))) => {
                let text = text_of(p);
                let chars = text.chars().count();
                let mut blocks = Blocks::default();
                if prefix {
                    blocks.push(text.as_bytes());
                }
                Ok((text, chars, None, blocks.finish()))
            }
            Some(_) => Err(invalid("prompt", "expected a string or an array")),
            None => Err(invalid("prompt", "missing")),
        },
    }
}

/// The output bound asked for. OpenAI's `max_completion_tokens` replaces the deprecated
/// `max_tokens`; a client that sends both is bounded by the smaller.
fn output_bound(fields: &serde_json::Map<String, Value>) -> Result<Option<u64>, Invalid> {
    let bound = |field: &'static str| match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(field, "expected a whole number >= 0")),
    };
    Ok(
        match (bound("max_tokens")?, bound("max_completion_tokens")?) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
    )
}

/// The text of a message's `content` or a completion's `prompt`: a string, or an array of
/// strings and `{"type": "text", "text": …}` parts (other parts, such as images, have none).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.as_str().or_else(|| p.get("text")?.as_str()))
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// A chat's prompt text, context characters, previous answer's characters and block hashes
/// (when `hash`).
fn conversation(messages: &[Value], hash: bool) -> (String, usize, Option<usize>, Prefix) {
    let texts: Vec<(Option<&str>, String)> = messages
        .iter()
        .map(|m| {
            let role = m.get("role").and_then(Value::as_str);
            (role, m.get("content").map(text_of).unwrap_or_default())
        })
        .collect();
    let context = texts.iter().map(|(_, t)| t.chars().count()).sum();
    let mut blocks = Blocks::default();
    for (role, text) in texts.iter().filter(|_| hash) {
        blocks.message(role.unwrap_or(""), text);
    }
    let prefix = blocks.finish();
    let Some(last_user) = texts.iter().rposition(|(role, _)| *role == Some("user")) else {
        let all: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
        return (all.join("\n"), context, None, prefix);
    };
    let previous = texts[..last_user]
        .iter()
        .rev()
        .find(|(role, _)| *role == Some("assistant"))
        .map(|(_, t)| t.chars().count());
    (texts[last_user].1.clone(), context, previous, prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_requests_pass_with_what_scheduling_needs() {
        let chat = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":8}"#;
        assert_eq!(
            check(Endpoint::Chat, chat),
            Ok(Checked {
                endpoint: Endpoint::Chat,
                stream: true,
                max_tokens: Some(8),
                prompt: "hi".into(),
                context_chars: 2,
                previous_answer_chars: None,
                choices: 1,
                priority: None,
                ignore_eos: false,
                prefix: Prefix::from([]),
            })
        );
        let c = check(Endpoint::Completions, br#"{"prompt":"once"}"#).expect("valid");
        assert!(!c.stream && c.max_tokens.is_none());
        assert_eq!((c.prompt.as_str(), c.context_chars), ("once", 4));
    }

    #[test]
    fn max_completion_tokens_bounds_the_answer_like_max_tokens() {
        let bound = |body: &[u8]| check(Endpoint::Chat, body).expect("valid").output_bound();
        assert_eq!(
            bound(br#"{"messages":[{}],"max_completion_tokens":12}"#),
            Some(12)
        );
        assert_eq!(
            bound(br#"{"messages":[{}],"max_completion_tokens":40,"max_tokens":30}"#),
            Some(30),
            "the smaller of both"
        );
        assert_eq!(
            bound(br#"{"messages":[{}],"max_completion_tokens":null}"#),
            None
        );
    }

    #[test]
    fn a_request_states_its_length_only_with_ignore_eos_and_a_bound() {
        let stated = |body: &[u8]| check(Endpoint::Chat, body).expect("valid").stated_length();
        assert_eq!(
            stated(br#"{"messages":[{}],"ignore_eos":true,"max_tokens":70}"#),
            Some(70)
        );
        assert_eq!(
            stated(br#"{"messages":[{}],"ignore_eos":true,"max_completion_tokens":9}"#),
            Some(9)
        );
        assert_eq!(stated(br#"{"messages":[{}],"max_tokens":70}"#), None);
        assert_eq!(stated(br#"{"messages":[{}],"ignore_eos":true}"#), None);
        assert_eq!(
            stated(br#"{"messages":[{}],"ignore_eos":false,"max_tokens":70}"#),
            None
        );
        assert_eq!(
            stated(br#"{"messages":[{}],"ignore_eos":1,"max_tokens":70}"#),
            None,
            "passed on for the engine to judge; it states nothing here"
        );
    }

    #[test]
    fn the_predictor_sees_the_last_question_and_the_answer_before_it() {
        let chat = br#"{"messages":[
            {"role":"system","content":"be brief"},
            {"role":"user","content":"first question"},
            {"role":"assistant","content":"an answer"},
            {"role":"user","content":[{"type":"text","text":"and"},{"type":"image_url"},{"type":"text","text":"then?"}]}
        ]}"#;
        let c = check(Endpoint::Chat, chat).expect("valid");
        assert_eq!(c.prompt, "and\nthen?");
        assert_eq!(c.previous_answer_chars, Some(9));
        assert_eq!(c.context_chars, 8 + 14 + 9 + 9);
        let no_user = check(
            Endpoint::Chat,
            br#"{"messages":[{"role":"system","content":"s"}]}"#,
        )
        .expect("valid");
        assert_eq!(
            (no_user.prompt.as_str(), no_user.previous_answer_chars),
            ("s", None)
        );
        let parts = check(Endpoint::Completions, br#"{"prompt":["a","b"]}"#).expect("valid");
        assert_eq!(parts.prompt, "a\nb");
    }

    #[test]
    fn the_context_is_hashed_only_when_asked() {
        let long = serde_json::json!({"messages": [
            {"role": "system", "content": "s".repeat(300)},
            {"role": "user", "content": "u".repeat(300)},
        ]})
        .to_string();
        let hashed = check_hashing(Endpoint::Chat, long.as_bytes(), true).expect("valid");
        assert_eq!(hashed.prefix.len(), 2, "614 bytes: two whole blocks");
        assert!(
            check(Endpoint::Chat, long.as_bytes())
                .expect("valid")
                .prefix
                .is_empty()
        );
        let prompt = serde_json::json!({"prompt": "p".repeat(600)}).to_string();
        let c = check_hashing(Endpoint::Completions, prompt.as_bytes(), true).expect("valid");
        assert_eq!(c.prefix.len(), 2);
    }

    #[test]
    fn each_malformed_field_is_named() {
        for (endpoint, body, field) in [
            (Endpoint::Chat, &b"not json"[..], "body"),
            (Endpoint::Chat, b"[1]", "body"),
            (Endpoint::Chat, br#"{"model":"m"}"#, "messages"),
            (Endpoint::Chat, br#"{"messages":[]}"#, "messages"),
            (Endpoint::Chat, br#"{"messages":[3]}"#, "messages"),
            (
                Endpoint::Chat,
                br#"{"messages":[{}],"stream":"yes"}"#,
                "stream",
            ),
            (
                Endpoint::Chat,
                br#"{"messages":[{}],"max_tokens":-1}"#,
                "max_tokens",
            ),
            (
                Endpoint::Chat,
                br#"{"messages":[{}],"max_completion_tokens":1.5}"#,
                "max_completion_tokens",
            ),
            (Endpoint::Chat, br#"{"messages":[{}],"model":7}"#, "model"),
            (Endpoint::Chat, br#"{"messages":[{}],"n":0}"#, "n"),
            (Endpoint::Completions, br#"{"prompt":5}"#, "prompt"),
        ] {
            let err = check(endpoint, body).expect_err(&String::from_utf8_lossy(body));
            assert_eq!(err.field, field, "{err}");
        }
    }
}
