//! The fake engine: an HTTP server in the test that answers like an engine and records what
//! reaches it, and a raw one whose connections a test serves by hand.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// What the fake engine saw.
pub struct Seen {
    /// Requests tagged `hold` wait for a permit here before they answer.
    pub gate: tokio::sync::Semaphore,
    /// Request tags in the order they arrived.
    pub order: Mutex<Vec<String>>,
    pub in_flight: AtomicUsize,
    pub most_in_flight: AtomicUsize,
    /// Streams whose client went away before the end.
    pub cut: AtomicUsize,
    /// What it answers at `GET /props` and `GET /metrics` (404 while `None`).
    pub props: Mutex<Option<String>>,
    pub metrics: Mutex<Option<String>>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            gate: tokio::sync::Semaphore::new(0),
            order: Mutex::default(),
            in_flight: AtomicUsize::default(),
            most_in_flight: AtomicUsize::default(),
            cut: AtomicUsize::default(),
            props: Mutex::default(),
            metrics: Mutex::default(),
        }
    }
}

/// A streamed body fed by a channel.
pub struct ChanBody(pub tokio::sync::mpsc::Receiver<Bytes>);

impl Body for ChanBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

pub type EngineBody = BoxBody<Bytes, Infallible>;

/// Answer like an engine: a request's `user` field is its tag and `ms` (else `max_tokens`) how
/// many ms to take; the answer is a JSON body naming the tag, with `answer_tokens` (a test's
/// field) as its usage's completion tokens when given (and `prompt_tokens`, else 3, as its
/// prompt's), or, when `stream`, one event per 20 ms (the first after `first_ms`, when given).
pub async fn engine(
    req: Request<Incoming>,
    seen: Arc<Seen>,
) -> Result<Response<EngineBody>, Infallible> {
    let path = req.uri().path().to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if path == "/metrics" || path == "/props" {
        // The gateway's scrapes: not requests.
        let page = if path == "/props" {
            &seen.props
        } else {
            &seen.metrics
        };
        let page = page.lock().expect("page").clone();
        let mut r = Response::new(Full::new(Bytes::from(page.clone().unwrap_or_default())).boxed());
        if page.is_none() {
            *r.status_mut() = StatusCode::NOT_FOUND;
        }
        return Ok(r);
    }
    if path == "/v1/models" {
        return Ok(Response::new(
            Full::new(Bytes::from_static(br#"{"data":[{"id":"fake"}]}"#)).boxed(),
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let tag = v["user"].as_str().unwrap_or("-").to_string();
    let ms = v["ms"].as_u64().or(v["max_tokens"].as_u64()).unwrap_or(0);
    seen.order.lock().expect("order").push(tag.clone());
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.most_in_flight.fetch_max(now, Ordering::SeqCst);
    if tag == "hold" {
        let _ = seen.gate.acquire().await;
    }
    if v["stream"] != true {
        // `shared`: one device split between all in flight (a request takes `ms` per request
        // running beside it): the engine's throughput is the same at every concurrency.
        let ms = if v["shared"] == true {
            ms * now as u64
        } else {
            ms
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        seen.in_flight.fetch_sub(1, Ordering::SeqCst);
        let text = match v["answer_tokens"].as_u64() {
            Some(n) => format!(
                r#"{{"id":"{tag}","choices":[{{"text":"ok"}}],"usage":{{"prompt_tokens":{},"completion_tokens":{n}}}}}"#,
                v["prompt_tokens"].as_u64().unwrap_or(3)
            ),
            None => format!(r#"{{"id":"{tag}","choices":[{{"text":"ok"}}]}}"#),
        };
        let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
        r.headers_mut()
            .insert("x-engine", "fake".parse().expect("header"));
        return Ok(r);
    }
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    // `first_ms` (a test's field): the first event comes that late, as after a long prefill.
    let first = Duration::from_millis(v["first_ms"].as_u64().unwrap_or(0));
    tokio::spawn(async move {
        tokio::time::sleep(first).await;
        for i in 0..ms / 20 {
            let event = Bytes::from(format!(
                "data: {{\"tag\":\"{tag}\",\"i\":{i},\"choices\":[{{\"delta\":{{\"content\":\"x\"}}}}]}}\n\n"
            ));
            if tx.send(event).await.is_err() {
                seen.cut.fetch_add(1, Ordering::SeqCst);
                seen.in_flight.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            if tag != "burst" {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
        if tag == "linger" {
            // The body stays open after `[DONE]`, as a slow engine's may.
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        seen.in_flight.fetch_sub(1, Ordering::SeqCst);
    });
    let mut r = Response::new(ChanBody(rx).boxed());
    r.headers_mut()
        .insert("content-type", "text/event-stream".parse().expect("header"));
    Ok(r)
}

/// The fake engine on a port of its own, served by `rt`.
pub fn start_engine(rt: &tokio::runtime::Runtime) -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("engine port");
    let addr = listener.local_addr().expect("addr");
    let s = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let s = s.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |r| engine(r, s.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// Read one HTTP/1.1 request (head and `content-length` body) from `s`; `None` at its end.
pub async fn read_request(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..].to_vec())
}

/// A raw engine on its own port: `serve` runs each accepted connection.
pub fn raw_engine<F, Fut>(rt: &tokio::runtime::Runtime, serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("engine port");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s));
        }
    });
    addr
}
