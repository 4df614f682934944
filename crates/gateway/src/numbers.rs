//! Ordering at the engine, the gateway's side (`--order-at engine`): each request goes to its
//! engine at once with the core's number in the body's `priority` (vLLM's field, lower first),
//! and the engine's own queue (vLLM's `--scheduling-policy priority`) puts it in the policy's
//! order. A `priority` the client sent has already decided its class (`classes.rs`), which the
//! number carries; it is replaced, never passed on beside it.
//!
//! An engine that does not order by numbers may refuse them: vLLM releases that check the
//! policy answer 400, naming priority scheduling. That answer is recognized here; the request is
//! sent again without a number, and the core orders the engine's requests in the gateway's queue
//! from then on. (vLLM 0.32 accepts numbers on an engine started `fcfs` and ignores them: no
//! refusal comes, and the engine serves first come first served.) Any other 400 is the engine's
//! own (a prompt longer than its window, say) and reaches the client as the engine sent it.

use crate::error::{AnswerBody, ApiError};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use serde_json::{Map, Value};
use std::time::Duration;

/// An engine's error answer is read up to this many bytes.
const REFUSAL_BYTES: usize = 64 * 1024;
/// And for at most this long.
const REFUSAL_TIME: Duration = Duration::from_secs(10);

/// `body` (a JSON object, checked on arrival) with `priority` set to `number`, or without a
/// `priority` at all (`None`).
pub fn stamped(body: &Bytes, number: Option<i64>) -> Result<Bytes, ApiError> {
    let mut fields: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::internal(format!("re-reading the checked request: {e}")))?;
    match number {
        Some(n) => fields.insert("priority".to_owned(), Value::from(n)),
        None => fields.remove("priority"),
    };
    serde_json::to_vec(&fields)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(format!("writing the request: {e}")))
}

/// Whether an engine's error message refuses a request's `priority` because the engine does
/// not schedule by priority.
pub fn refuses_numbers(message: &[u8]) -> bool {
    let text = String::from_utf8_lossy(message).to_ascii_lowercase();
    text.contains("priority") && (text.contains("not enabled") || text.contains("not support"))
}

/// An engine's error answer, read whole (within a bound and a time): its status, content type
/// and body.
pub async fn read_error(answer: Response<Incoming>) -> (StatusCode, Option<Bytes>, Bytes) {
    let status = answer.status();
    let kind = answer
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| Bytes::copy_from_slice(v.as_bytes()));
    let read = crate::body::read(answer.into_body(), REFUSAL_BYTES, REFUSAL_BYTES);
    let bytes = match tokio::time::timeout(REFUSAL_TIME, read).await {
        Ok(Ok(b)) => b,
        _ => Bytes::new(),
    };
    (status, kind, bytes)
}

/// The engine's error answer, passed on as it was read.
pub fn passed_on(status: StatusCode, kind: Option<Bytes>, bytes: Bytes) -> Response<AnswerBody> {
    let mut r = Response::new(Full::new(bytes).map_err(|never| match never {}).boxed());
    *r.status_mut() = status;
    if let Some(v) = kind.and_then(|k| hyper::header::HeaderValue::from_maybe_shared(k).ok()) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_replaces_the_clients_priority_and_none_removes_it() {
        let body = Bytes::from_static(br#"{"model":"m","priority":-3,"messages":[]}"#);
        let with: Value =
            serde_json::from_slice(&stamped(&body, Some(42)).expect("json")).expect("json");
        assert_eq!(with["priority"], 42);
        assert_eq!(with["model"], "m");
        let without: Value =
            serde_json::from_slice(&stamped(&body, None).expect("json")).expect("json");
        assert!(without.get("priority").is_none());
        // A number beyond 2^53 is kept exact.
        let big = stamped(&body, Some(-1_000_000_000_000_123)).expect("json");
        assert!(String::from_utf8_lossy(&big).contains("-1000000000000123"));
    }

    #[test]
    fn only_a_refusal_naming_priority_scheduling_counts() {
        assert!(refuses_numbers(
            br#"{"error":{"message":"Got priority 5 but Priority scheduling is not enabled."}}"#
        ));
        assert!(refuses_numbers(b"priority scheduling is not supported"));
        assert!(!refuses_numbers(
            br#"{"error":{"message":"This model's maximum context length is 2048 tokens"}}"#
        ));
    }
}
