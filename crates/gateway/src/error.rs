//! Every error the gateway answers with, as one type turned into a response in one place
//! ([`ApiError::into_response`]), in the OpenAI shape clients already read:
//! `{"error": {"message", "type", "param"}}`. Handlers return `Result<_, ApiError>` and a `?`
//! carries a refusal from wherever it was found (a bad field, a full queue, an unreachable
//! engine) to the client, with the status, `Retry-After` and `Connection: close` it calls for.

use crate::body::Unread;
use crate::classes::BadClass;
use crate::request::Invalid;
use crate::request_queue::RequestRefused;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};

/// Why an answer's body failed (the engine's connection, or the idle timeout).
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every answer the gateway gives.
pub type AnswerBody = BoxBody<Bytes, BodyError>;

/// The header a refusal by the scheduling core carries its reason in (`queue-full`,
/// `displaced`, `saturated`, `no-engine`, `tenant-limit`), on the gateway's answers and the
/// endpoint picker's immediate responses alike.
pub const SHED_REASON: &str = "x-xsched-shed-reason";

/// What an evicted request's client is told (a 503 with `Retry-After` before its answer
/// began, an error event after).
pub const EVICTED: &str =
    "evicted: a request of a higher class needed the engine's slot; retry later";

/// An error answer: its status, OpenAI error type, message and the parameter it names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The OpenAI error type (`invalid_request_error`, `rate_limit_error`, …).
    pub kind: &'static str,
    /// What is wrong.
    pub message: String,
    /// The request field or header it names, if any.
    pub param: Option<&'static str>,
    /// Whether the client is told to retry after a second (`Retry-After: 1`).
    pub retry: bool,
    /// Whether the connection is closed after it (a body left unread on it).
    pub close: bool,
    /// The core's refusal it reports, if it is one (the endpoint picker answers by it).
    pub refused: Option<RequestRefused>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            param: None,
            retry: false,
            close: false,
            refused: None,
        }
    }

    /// A 400 naming `param`.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            param: Some(param),
            ..ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
        }
    }

    /// A 404 for a path the gateway does not serve.
    pub fn no_route(path: &str) -> ApiError {
        let message = format!(
            "no route {path}: the gateway serves /v1/chat/completions, /v1/completions and /v1/models"
        );
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
    }

    /// A 408: the body did not come in time.
    pub fn body_timeout(within: std::time::Duration) -> ApiError {
        ApiError {
            param: Some("body"),
            ..ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                format!("body: not sent within {} s", within.as_secs_f64()),
            )
        }
    }

    /// A 429.
    pub fn rate_limited(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message)
    }

    /// A 503, with `Retry-After` when `retry`.
    pub fn unavailable(message: impl Into<String>, retry: bool) -> ApiError {
        ApiError {
            retry,
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
        }
    }

    /// A 500: the gateway's own work failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// A 502: the upstream could not be reached or failed.
    pub fn bad_gateway(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", message)
    }

    /// A 504: the upstream sent no answer in time.
    pub fn gateway_timeout(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::GATEWAY_TIMEOUT, "upstream_error", message)
    }

    /// The answer: the OpenAI error JSON with its status and headers.
    pub fn into_response(self) -> Response<AnswerBody> {
        let body = serde_json::json!({
            "error": {"message": self.message, "type": self.kind, "param": self.param}
        });
        let mut r = Response::new(
            Full::new(Bytes::from(body.to_string()))
                .map_err(|never| match never {})
                .boxed(),
        );
        *r.status_mut() = self.status;
        let headers = r.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if self.retry {
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.close {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(reason) = self.refused.and_then(RequestRefused::reason) {
            headers.insert(SHED_REASON, HeaderValue::from_static(reason.name()));
        }
        r
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> ApiError {
        ApiError::invalid(e.field, e.to_string())
    }
}

impl From<BadClass> for ApiError {
    fn from(e: BadClass) -> ApiError {
        ApiError::invalid(e.header, e.to_string())
    }
}

impl From<Unread> for ApiError {
    fn from(e: Unread) -> ApiError {
        match e {
            Unread::TooLarge { drained, .. } => ApiError {
                // Not read to its end: the rest of it is still on the connection.
                close: !drained,
                ..ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    format!("body: {e}"),
                )
            },
            Unread::Failed(_) => ApiError::invalid("body", format!("body: {e}")),
        }
    }
}

impl From<RequestRefused> for ApiError {
    fn from(e: RequestRefused) -> ApiError {
        let error = match e {
            RequestRefused::Full(_) | RequestRefused::TenantLimit => {
                ApiError::rate_limited(e.to_string())
            }
            RequestRefused::Shed(_) | RequestRefused::Silent => {
                ApiError::unavailable(e.to_string(), true)
            }
            RequestRefused::Closed => ApiError::unavailable(e.to_string(), false),
        };
        ApiError {
            refused: Some(e),
            ..error
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xsched_llm_core::ShedReason;

    #[test]
    fn each_refusal_has_its_status_and_headers() {
        let shed = ApiError::from(RequestRefused::Shed(ShedReason::Saturated)).into_response();
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            shed.headers().get(RETRY_AFTER).map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let full = ApiError::from(RequestRefused::Full(3)).into_response();
        assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            full.headers().get(SHED_REASON).map(|v| v.as_bytes()),
            Some(&b"queue-full"[..])
        );
        assert!(full.headers().get(RETRY_AFTER).is_none());
        let big = ApiError::from(Unread::TooLarge {
            limit: 1,
            drained: false,
        })
        .into_response();
        assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            big.headers().get(CONNECTION).map(|v| v.as_bytes()),
            Some(&b"close"[..])
        );
        let bad = ApiError::invalid("messages", "messages: missing");
        assert_eq!(bad.param, Some("messages"));
    }
}
