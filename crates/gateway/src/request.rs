//! What the gateway checks of a request before it queues it: that the body is JSON of the
//! endpoint's shape, as far as scheduling needs it. Everything else passes through unchanged for
//! the engine to judge. A malformed request gets a 400 whose message names the field.

use serde_json::Value;

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
    /// The requested output bound, if any.
    pub max_tokens: Option<u64>,
}

/// Why a request was refused: the field and what it must be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
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
pub fn check(endpoint: Endpoint, body: &[u8]) -> Result<Checked, Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| invalid("body", format!("not JSON ({e})")))?;
    let Value::Object(fields) = value else {
        return Err(invalid("body", "expected a JSON object"));
    };
    match endpoint {
        Endpoint::Chat => match fields.get("messages") {
            Some(Value::Array(m)) if !m.is_empty() => {
                if let Some(i) = m.iter().position(|v| !v.is_object()) {
                    return Err(invalid("messages", format!("item {i} is not an object")));
                }
            }
            Some(Value::Array(_)) => return Err(invalid("messages", "must not be empty")),
            Some(_) => return Err(invalid("messages", "expected an array of messages")),
            None => return Err(invalid("messages", "missing")),
        },
        Endpoint::Completions => match fields.get("prompt") {
            Some(Value::String(_) | Value::Array(_)) => {}
            Some(_) => return Err(invalid("prompt", "expected a string or an array")),
            None => return Err(invalid("prompt", "missing")),
        },
    }
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
    let max_tokens = match fields.get("max_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| invalid("max_tokens", "expected a whole number >= 0"))?,
        ),
    };
    Ok(Checked {
        endpoint,
        stream,
        max_tokens,
    })
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
                max_tokens: Some(8)
            })
        );
        let c = check(Endpoint::Completions, br#"{"prompt":"once"}"#).expect("valid");
        assert!(!c.stream && c.max_tokens.is_none());
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
            (Endpoint::Chat, br#"{"messages":[{}],"model":7}"#, "model"),
            (Endpoint::Completions, br#"{"prompt":5}"#, "prompt"),
        ] {
            let err = check(endpoint, body).expect_err(&String::from_utf8_lossy(body));
            assert_eq!(err.field, field, "{err}");
        }
    }
}
