//! What the gateway's tests share: a fake engine (an HTTP server in the test that records what
//! reaches it), a gateway in front of it, and a client.
#![allow(dead_code)] // each test binary uses its own part

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
use xsched_gateway::{Gateway, GatewayConfig, RequestPolicySpec, RunningGateway};

pub fn policy(name: &str) -> RequestPolicySpec {
    name.parse().expect("a known policy")
}

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

/// Wait (async) until `ok` holds, failing after 30 s.
pub async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
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

pub fn config(upstreams: &[SocketAddr], concurrency: usize) -> GatewayConfig {
    GatewayConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        upstreams
            .iter()
            .map(|a| format!("http://{a}").parse().expect("uri"))
            .collect(),
        concurrency,
    )
}

pub fn gateway(upstreams: &[SocketAddr], concurrency: usize, max_waiting: usize) -> RunningGateway {
    serve(GatewayConfig {
        max_waiting,
        ..config(upstreams, concurrency)
    })
}

pub fn serve(config: GatewayConfig) -> RunningGateway {
    Gateway::bind(config).expect("bind").spawn().expect("serve")
}

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

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
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

/// The order the queued prompts of [`sequence`] arrive in (indices), in the parity tests.
pub const ARRIVAL_ORDER: [usize; 8] = [1, 5, 3, 7, 0, 2, 6, 4];

/// Prompts of a multiple of 4 characters (the gateway's token estimate, 0.25 a character, is
/// then exact) and their true answer lengths.
pub fn sequence() -> Vec<(String, u32)> {
    let texts = [
        ("say yes or no", 3),
        ("write a long essay on the history of rome", 900),
        ("list three colours", 40),
        ("explain how a compiler works in detail", 200),
        ("what is two plus two", 10),
        ("write a story about a dragon and a knight", 600),
        ("summarise this paragraph briefly", 80),
        ("reply with ok", 5),
    ];
    texts
        .into_iter()
        .map(|(t, n)| {
            let pad = (4 - t.len() % 4) % 4;
            (format!("{t}{}", ".".repeat(pad)), n)
        })
        .collect()
}

/// The order the engine simulator admits `arrival_order`'s prompts (tagged `q<index>`) under
/// `sagesched-noaging`: each prompt learned four times first, then the arrivals queued behind a
/// long request on an engine of one slot. What the gateway and the endpoint picker must match.
pub fn simulated_order(prompts: &[(String, u32)], arrival_order: &[usize]) -> Vec<String> {
    use xsched_llm::Request;
    use xsched_llm::engine::EngineConfig;
    use xsched_llm::sim::{self, Cluster};
    use xsched_llm_predict::embedding::{Embedder, Hashed};
    let request = |id: usize, arrival: f64, prompt: &str, input: u32, output: u32| Request {
        id,
        arrival,
        prompt: prompt.to_string(),
        input_tokens: input,
        output_tokens: output,
        previous_answer_tokens: None,
        embedding: Hashed.embed(prompt),
    };
    let warm: Vec<Request> = (0..4)
        .flat_map(|_| prompts.iter())
        .enumerate()
        .map(|(i, (p, n))| request(i, 0.0, p, (p.len() / 4) as u32, *n))
        .collect();
    let mut requests = vec![request(0, 0.0, "hi", 1, 2000)];
    for (i, &k) in arrival_order.iter().enumerate() {
        let (p, n) = &prompts[k];
        let arrival = 0.001 * (i + 1) as f64;
        requests.push(request(i + 1, arrival, p, (p.len() / 4) as u32, *n));
    }
    let cfg = EngineConfig {
        max_num_seqs: 1,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let run = sim::simulate(
        &cfg,
        Cluster::SINGLE,
        policy("sagesched-noaging"),
        xsched_gateway::forecast::HISTORY,
        &warm,
        &requests,
    )
    .expect("run");
    run.admitted[1..]
        .iter()
        .map(|&i| format!("q{}", arrival_order[i - 1]))
        .collect()
}

/// A chat request tagged `tag` for `prompt` whose fake-engine answer counts `tokens` (and the
/// prompt's exact estimate of a quarter token a character).
pub fn with_tokens(tag: &str, prompt: &str, tokens: u32) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": 4096, "ms": 0, "answer_tokens": tokens,
        "prompt_tokens": prompt.len() / 4,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string()
}

/// Answers learned from, in a metrics page of `policy` (its predictor-error count).
pub fn learned_in(page: &str, policy: &str) -> u64 {
    let key = format!("xsched_gateway_predictor_abs_error_tokens_count{{policy=\"{policy}\"}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&key)?.parse().ok())
        .unwrap_or(0)
}

/// The serving script the gateway, the endpoint picker and the simulator must decide alike
/// (engine A's metrics say it queues, B is free; one slot each; two may wait; tenant
/// `nightly` may hold two): each request's tag, tenant and class, in arrival order. Once all
/// have arrived, A's metrics clear, and `hold` (on B) is released last.
pub const SCRIPT: [(&str, Option<&str>, i32); 6] = [
    ("hold", Some("nightly"), 0),
    ("r2", Some("nightly"), 0),
    ("r3", Some("nightly"), 0),
    ("r4", None, -1),
    ("r5", None, 0),
    ("r6", None, 0),
];

/// The classes file of [`SCRIPT`].
pub const SCRIPT_CLASSES: &str = "[tenants.nightly]\nmax_requests = 2\n";

/// What every driver decides for [`SCRIPT`]: each request's engine (`A`, `B`) or the core's
/// reason for shedding it.
pub const SCRIPT_DECIDED: [(&str, &str); 6] = [
    ("hold", "B"),
    ("r2", "A"),
    ("r3", "tenant-limit"),
    ("r4", "displaced"),
    ("r5", "A"),
    ("r6", "queue-full"),
];

/// A metrics page of engine waiting `n` (vLLM's name).
pub fn queueing(n: u32) -> Option<String> {
    Some(format!(
        "vllm:num_requests_waiting{{model_name=\"m\"}} {n}\n"
    ))
}

/// The headers a [`SCRIPT`] request is sent with.
pub fn script_headers(tenant: Option<&'static str>, class: i32) -> Vec<(&'static str, String)> {
    let mut h = vec![("x-dynamo-request-priority", class.to_string())];
    h.extend(tenant.map(|t| ("x-llm-d-inference-fairness-id", t.to_string())));
    h
}

/// Whether a metrics page says `upstream`'s engine reported `n` waiting.
pub fn reported_waiting(page: &str, upstream: SocketAddr, n: u32) -> bool {
    let label = format!("upstream=\"http://{upstream}\"");
    page.lines().any(|l| {
        l.starts_with("xsched_gateway_upstream_waiting{")
            && l.contains(&label)
            && l.ends_with(&format!(" {n}"))
    })
}

/// [`SCRIPT`] through the engine simulator: the same scrapes fed at their times (A queueing
/// from 0, clear at 0.5 s), the same classes, tenants, queue bound and tenant limit.
pub fn simulated_decisions() -> std::collections::BTreeMap<String, String> {
    use xsched_llm::engine::EngineConfig;
    use xsched_llm::sim::{Cluster, Rules, Runs};
    use xsched_llm_core::watch::{EngineMetrics, Scrape};
    use xsched_llm_core::{Eviction, Fairness, Input, Placement, Router};
    use xsched_llm_predict::embedding::{Embedder, Hashed};
    let requests: Vec<xsched_llm::Request> = (SCRIPT.iter().enumerate())
        .map(|(id, (tag, ..))| xsched_llm::Request {
            id,
            arrival: 0.001 * (id + 1) as f64,
            prompt: tag.to_string(),
            input_tokens: 10,
            output_tokens: if *tag == "hold" { 2000 } else { 5 },
            previous_answer_tokens: None,
            embedding: Hashed.embed(tag),
        })
        .collect();
    let scrape = |engine: usize, waiting: f64| Input::Scraped {
        engine,
        scrape: Scrape {
            alive: true,
            metrics: Some(EngineMetrics {
                waiting: Some(waiting),
                ..EngineMetrics::default()
            }),
            slots: None,
        },
    };
    // Tenants as the gateway numbers them: `default`, `other`, then the file's.
    let tenant = |t: Option<&str>| usize::from(t.is_some()) * 2;
    let rules = Rules {
        fairness: Fairness {
            tenant_limits: vec![None, None, Some(2)],
            ..Fairness::with_eviction(Eviction::One)
        },
        classes: SCRIPT.iter().map(|s| s.2).collect(),
        tenants: SCRIPT.iter().map(|s| tenant(s.1)).collect(),
        max_waiting: Some(2),
        outside: vec![
            (0.0, scrape(0, 1.0)),
            (0.0, scrape(1, 0.0)),
            (0.5, scrape(0, 0.0)),
        ],
        ..Rules::default()
    };
    let cfg = EngineConfig {
        max_num_seqs: 1,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let cluster = Cluster {
        instances: 2,
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
    };
    let runs = Runs {
        cfg: &cfg,
        cluster,
        history: 0,
        warm: &[],
    };
    let run = (runs.simulate(policy("fcfs"), &rules, &requests)).expect("run");
    (run.decided.iter())
        .map(|(i, d)| {
            let decided = match d {
                Ok(e) => ["A", "B"][*e].to_string(),
                Err(reason) => reason.name().to_string(),
            };
            (SCRIPT[*i].0.to_string(), decided)
        })
        .collect()
}

/// [`SCRIPT_DECIDED`] as a map.
pub fn script_decided() -> std::collections::BTreeMap<String, String> {
    (SCRIPT_DECIDED.iter())
        .map(|(t, d)| (t.to_string(), d.to_string()))
        .collect()
}
