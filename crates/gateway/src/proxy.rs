//! Forwarding one admitted request to its upstream and its answer back, unchanged: the method,
//! path, query, body and the headers that matter (content type, authorization, accept) go up;
//! the status, headers and body (streamed chunk by chunk, so server-sent events arrive as the
//! engine sends them) come down. The request's [`Slot`] rides with the answer's body and is
//! freed when the body ends or is dropped, so a client that disconnects mid-stream frees its
//! engine slot (the upstream connection is dropped with it, which the engine sees).

use crate::admission::Slot;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
pub use hyper::Uri;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The body type of every answer the gateway gives.
pub type AnswerBody = BoxBody<Bytes, hyper::Error>;

/// The HTTP client the gateway talks to upstreams with.
pub type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// A new client (connection pooling per upstream, HTTP/1.1).
pub fn client() -> UpstreamClient {
    Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// A complete answer with a JSON body.
pub fn json(status: StatusCode, body: &serde_json::Value) -> Response<AnswerBody> {
    let mut r = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// An error answer in the OpenAI shape (`{"error": {"message", "type", "param"}}`).
pub fn error(
    status: StatusCode,
    kind: &str,
    message: &str,
    param: Option<&str>,
) -> Response<AnswerBody> {
    json(
        status,
        &serde_json::json!({"error": {"message": message, "type": kind, "param": param}}),
    )
}

/// Send `body` to `base` + `path_and_query` like the client's request `parts`, and answer with
/// the upstream's answer (its body carrying `slot`), or a 502 saying why the upstream could not
/// be reached.
pub async fn forward(
    client: &UpstreamClient,
    base: &Uri,
    parts: &hyper::http::request::Parts,
    body: Bytes,
    slot: Option<Slot>,
) -> Response<AnswerBody> {
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", hyper::http::uri::PathAndQuery::as_str);
    let uri = match format!("{}{path}", base.to_string().trim_end_matches('/')).parse::<Uri>() {
        Ok(u) => u,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                &format!("upstream {base}: {e}"),
                None,
            );
        }
    };
    let mut up = Request::builder().method(parts.method.clone()).uri(uri);
    for name in [CONTENT_TYPE, AUTHORIZATION, ACCEPT] {
        if let Some(v) = parts.headers.get(&name) {
            up = up.header(name, v);
        }
    }
    let up = match up.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                &e.to_string(),
                None,
            );
        }
    };
    match client.request(up).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            Response::from_parts(parts, Guarded { body, _slot: slot }.boxed())
        }
        Err(e) => {
            tracing::warn!("upstream {base}: {e}");
            error(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                &format!("upstream {base} failed: {e}"),
                None,
            )
        }
    }
}

/// An upstream answer's body with the slot it holds.
struct Guarded {
    body: Incoming,
    _slot: Option<Slot>,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
