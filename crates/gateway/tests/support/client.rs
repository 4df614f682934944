//! The client: requests to a gateway (or straight to the fake engine) and their answers.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::net::SocketAddr;

/// POST `body` to `path` at `addr`; the status, one header and the whole body.
pub async fn post(
    addr: SocketAddr,
    path: &str,
    body: String,
) -> (StatusCode, Option<String>, Bytes) {
    let (status, headers, bytes) = post_with(addr, path, body, &[]).await;
    let engine = headers
        .get("x-engine")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, engine, bytes)
}

/// POST `body` with `headers` to `path` at `addr`; the answer, its body unread.
pub async fn open_with(
    addr: SocketAddr,
    path: &str,
    body: String,
    headers: &[(&str, &str)],
) -> Response<Incoming> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut req =
        Request::post(format!("http://{addr}{path}")).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    client.request(req).await.expect("an answer")
}

/// POST `body` with `headers` to `path` at `addr`; the status, the answer's headers and body.
pub async fn post_with(
    addr: SocketAddr,
    path: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (StatusCode, hyper::HeaderMap, Bytes) {
    let r = open_with(addr, path, body, headers).await;
    let (status, headers) = (r.status(), r.headers().clone());
    let bytes = r.into_body().collect().await.expect("body").to_bytes();
    (status, headers, bytes)
}

/// GET `path` at `addr`: the status and body.
pub async fn get(addr: SocketAddr, path: &str) -> (StatusCode, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::get(format!("http://{addr}{path}"))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let r = client.request(req).await.expect("an answer");
    let status = r.status();
    (
        status,
        r.into_body().collect().await.expect("body").to_bytes(),
    )
}

pub fn chat(tag: &str, ms: u64, stream: bool) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": ms, "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}
