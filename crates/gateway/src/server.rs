//! The HTTP front: `POST /v1/chat/completions` and `POST /v1/completions` are checked, queued
//! and forwarded in the policy's order; `GET /v1/models` goes straight to the first upstream;
//! anything else is a 404. It runs on its own tokio runtime ([`Gateway::spawn`]) so a caller
//! without one (the CLI, a test) can start and stop it.
//!
//! That runtime has one thread. A streamed event costs the gateway a few µs, so one thread
//! passes on well over 100 000 events a second; a second worker thread made every event dearer
//! instead (9–14 µs against 5.2 µs per event, docs/BENCHMARKS.md "The gateway's own cost"):
//! waking a task then wakes the other worker too, and the answer's body could not gather what
//! the engine's connection had already read (`proxy.rs`). CPU work that could hold the thread
//! (embedding a prompt, scanning the history, learning) runs on the blocking pool.

use crate::admission::{Refused, RequestQueue};
use crate::body::{self, Unread};
use crate::classes::{self, Classes};
use crate::conns::{self, BusyBody, Connections};
use crate::engines::Engines;
use crate::forecast::{Forecaster, TOKENS_PER_CHAR};
use crate::health::Health;
use crate::metrics::{self, Metrics};
use crate::proxy::{self, AnswerBody, Learning, Timeouts, Timing, Tracked, Upstreams};
use crate::request::{self, Endpoint};
use crate::tally::Tally;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use xsched_llm_core::service::{Rates, ServiceModel};
use xsched_llm_core::{
    Arrival, Config, EngineLimits, Fairness, Placement, RequestPolicySpec, Router,
    SizeDistribution, Source,
};
use xsched_llm_predict::embedding::{Embedder, Hashed};

/// The largest request body read (bytes); larger is a 413.
pub const MAX_BODY: usize = 4 << 20;
/// Bodies up to this size are checked on the runtime's thread (tens of µs); larger ones on the
/// blocking pool.
const CHECK_INLINE_BYTES: usize = 64 << 10;
/// How much of a body past [`MAX_BODY`] is read and dropped so that its client, still sending,
/// gets its 413 rather than a reset connection; past this the connection is just closed.
pub const MAX_DRAIN: usize = 64 << 20;
/// The largest request head (request line and headers, bytes); larger is a 431.
pub const MAX_HEAD: usize = 32 << 10;
/// How long a client may take to send a request's headers (and how long an idle keep-alive
/// connection stays open), and then its body (a 408 after).
pub const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
pub use crate::conns::MAX_CONNECTIONS;

/// What the gateway serves.
#[derive(Clone)]
pub struct GatewayConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The engines (`http://host:port`).
    pub upstreams: Vec<Uri>,
    /// The policy (`xsched-llm-core`'s; those that pause running requests or order by noisy
    /// samples of the truth are simulation-only and refused; the oracles order by each
    /// request's stated length: [`crate::request::Checked::stated_length`]).
    pub policy: RequestPolicySpec,
    /// Requests in flight per upstream at most (configured; llama.cpp's server: its
    /// `--parallel` slots).
    pub concurrency: usize,
    /// Each upstream's KV capacity in tokens, if known: expected-peak admission then keeps the
    /// predicted KV of the requests in flight there within it.
    pub kv_tokens: Option<u64>,
    /// Requests waiting at most; past it, a 429.
    pub max_waiting: usize,
    /// Which upstream a request goes to.
    pub router: Router,
    /// The prompt embedding the predictor uses (both SageSched policies and the cost-aware
    /// router predict; `None`: the built-in hashed n-grams).
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Entries the predictor's history holds.
    pub history: usize,
    /// How long an upstream may take to answer.
    pub timeouts: Timeouts,
    /// Client connections at once at most (lowered to what the descriptor limit allows; at the
    /// cap the oldest idle connection is closed for a new one).
    pub max_connections: usize,
    /// Priority classes and tenants (`classes.rs`; built-in ones by default).
    pub classes: Arc<Classes>,
    /// How often each engine's metrics and slots are read (`engines.rs`; `None`: never, and
    /// `--concurrency` alone bounds admission).
    pub scrape: Option<std::time::Duration>,
    /// Learn each upstream's concurrency from its throughput, between 1 and `concurrency` (or
    /// its slots, when lower; `concurrency.rs`), instead of admitting `concurrency` always.
    pub learn_concurrency: bool,
}

impl GatewayConfig {
    /// `listen` in front of `upstreams`, first come first served to the least loaded, `concurrency`
    /// in flight per upstream, at most 1024 waiting.
    pub fn new(listen: SocketAddr, upstreams: Vec<Uri>, concurrency: usize) -> GatewayConfig {
        GatewayConfig {
            listen,
            upstreams,
            policy: RequestPolicySpec::FCFS,
            concurrency,
            kv_tokens: None,
            max_waiting: 1024,
            router: Router::LeastOutstanding,
            embedder: None,
            history: crate::forecast::HISTORY,
            timeouts: proxy::TIMEOUTS,
            max_connections: MAX_CONNECTIONS,
            classes: Arc::new(Classes::default()),
            scrape: Some(crate::engines::SCRAPE_INTERVAL),
            learn_concurrency: false,
        }
    }

    /// Whether requests are predicted.
    fn predicts(&self) -> bool {
        self.policy.predicts() || self.router.predicts()
    }
}

impl std::fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("listen", &self.listen)
            .field("upstreams", &self.upstreams)
            .field("policy", &self.policy)
            .field("concurrency", &self.concurrency)
            .field("kv_tokens", &self.kv_tokens)
            .field("max_waiting", &self.max_waiting)
            .field("router", &self.router)
            .field("embedder", &self.embedder.as_ref().map(|e| e.name()))
            .field("history", &self.history)
            .field("timeouts", &self.timeouts)
            .field("max_connections", &self.max_connections)
            .field("classes", &self.classes)
            .field("scrape", &self.scrape)
            .field("learn_concurrency", &self.learn_concurrency)
            .finish()
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No upstream, or one that is not an `http://` URL.
    #[error("upstream: {0}")]
    Upstream(String),
    /// A zero concurrency or queue bound.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A policy the gateway cannot run.
    #[error("policy `{policy}`: {reason}")]
    Policy {
        /// The policy.
        policy: String,
        /// Why not.
        reason: String,
    },
    /// The listening socket or the runtime.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

struct Shared {
    config: GatewayConfig,
    metrics: Arc<Metrics>,
    admission: Arc<RequestQueue>,
    forecaster: Option<Arc<Forecaster>>,
    upstreams: Upstreams,
    connections: Arc<Connections>,
    engines: Option<Arc<Engines>>,
}

/// A gateway bound to its address, not yet serving.
pub struct Gateway {
    shared: Arc<Shared>,
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
}

/// A gateway serving on its own thread; dropping it stops it.
pub struct RunningGateway {
    addr: SocketAddr,
    admission: Arc<RequestQueue>,
    upstreams: usize,
    /// Ends the serving thread's loop.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Gateway {
    /// Check `config` and bind its address.
    pub fn bind(config: GatewayConfig) -> Result<Gateway, GatewayError> {
        if config.upstreams.is_empty() {
            return Err(GatewayError::Upstream("at least one is needed".into()));
        }
        if let Some(u) = config
            .upstreams
            .iter()
            .find(|u| u.scheme_str() != Some("http"))
        {
            return Err(GatewayError::Upstream(format!(
                "`{u}` is not an http:// URL (https to an upstream is not supported)"
            )));
        }
        if config.concurrency == 0 {
            return Err(GatewayError::Zero("concurrency"));
        }
        if config.max_waiting == 0 {
            return Err(GatewayError::Zero("the queue bound"));
        }
        if config.max_connections == 0 {
            return Err(GatewayError::Zero("the connection cap"));
        }
        if config.timeouts.first_byte.is_zero() || config.timeouts.idle.is_zero() {
            return Err(GatewayError::Zero("an upstream timeout"));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("xsched-gateway-blocking")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(config.listen))?;
        if config.history == 0 {
            return Err(GatewayError::Zero("the predictor's history"));
        }
        if matches!(config.policy.source, Source::Noisy(_)) {
            return Err(GatewayError::Policy {
                policy: config.policy.to_string(),
                reason: "it orders by noisy samples of the true answer lengths, which only a \
                         simulation knows"
                    .into(),
            });
        }
        let limits = EngineLimits {
            concurrency: config.concurrency,
            kv_tokens: config.kv_tokens,
            block_tokens: 16,
        };
        let admission = RequestQueue::new(Config {
            policy: config.policy,
            engines: vec![limits; config.upstreams.len()],
            router: config.router,
            placement: Placement::WhenFree,
            max_waiting: config.max_waiting,
            service: ServiceModel::Measured(Rates::default()),
            can_pause: false,
            fairness: Fairness {
                weights: config.classes.weights(),
                sheddable_waiting: config.classes.sheddable_waiting(),
                ..Fairness::with_eviction(config.classes.eviction())
            },
            learn_concurrency: config.learn_concurrency,
        })
        .map_err(|e| GatewayError::Policy {
            policy: config.policy.to_string(),
            reason: e.to_string(),
        })?;
        let metrics = Arc::new(Metrics::for_tenants(config.classes.max_tenants()));
        let forecaster = config.predicts().then(|| {
            let embedder = config
                .embedder
                .clone()
                .unwrap_or_else(|| Arc::new(Hashed) as Arc<dyn Embedder>);
            Arc::new(Forecaster::new(embedder, config.history, metrics.clone()))
        });
        let health = Health::new(
            admission.clone(),
            config
                .upstreams
                .iter()
                .map(|u| u.to_string().trim_end_matches('/').to_string())
                .collect(),
        );
        let (upstreams, engines) = {
            let _enter = runtime.enter();
            let engines = config.scrape.filter(|d| !d.is_zero()).map(|every| {
                Engines::spawn(
                    config.upstreams.clone(),
                    admission.clone(),
                    every,
                    config.concurrency,
                    config.kv_tokens,
                )
            });
            (
                Upstreams::new(config.upstreams.clone(), config.timeouts, health),
                engines,
            )
        };
        // An upstream connection a request in flight, and one more while it is retried.
        let upstream_connections = 2 * config.upstreams.len() * config.concurrency;
        let connections =
            Connections::new(conns::cap(config.max_connections, upstream_connections));
        Ok(Gateway {
            shared: Arc::new(Shared {
                config,
                metrics,
                admission,
                forecaster,
                upstreams,
                connections,
                engines,
            }),
            runtime,
            listener,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve on a thread of its own until the returned handle is dropped.
    pub fn spawn(self) -> std::io::Result<RunningGateway> {
        let addr = self.listener.local_addr()?;
        let (shared, listener, runtime) = (self.shared, self.listener, self.runtime);
        let admission = shared.admission.clone();
        let upstreams = shared.config.upstreams.len();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("xsched-gateway".into())
            .spawn(move || {
                let mut serving = std::pin::pin!(accept(listener, shared));
                let mut stopped = stopped;
                runtime.block_on(std::future::poll_fn(|cx| {
                    if serving.as_mut().poll(cx).is_ready()
                        || std::pin::Pin::new(&mut stopped).poll(cx).is_ready()
                    {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }));
                // Connections still open are dropped with their tasks; blocking work in flight
                // (a prediction) is not waited for.
                runtime.shutdown_background();
            })?;
        Ok(RunningGateway {
            addr,
            admission,
            upstreams,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl RunningGateway {
    /// The address it serves on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many requests wait, and how many are in flight on each upstream.
    pub fn load(&self) -> (usize, Vec<usize>) {
        self.admission.load(self.upstreams)
    }

    /// Requests that reached the queue so far (admitted, waiting, refused or gone).
    pub fn arrivals(&self) -> u64 {
        self.admission.arrivals()
    }

    /// Serve until the process ends.
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let room = shared.connections.room().await;
        let stream = match listener.accept().await {
            Ok((s, _)) => {
                // A stream is many small writes (one event a token): without this, Nagle's
                // algorithm holds each behind the client's delayed ACK (measured: 44 ms added to
                // a 100-event answer that takes 2.6 ms directly).
                if let Err(e) = s.set_nodelay(true) {
                    tracing::debug!("gateway: TCP_NODELAY: {e}");
                }
                s
            }
            Err(e) => {
                tracing::warn!("gateway: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let occupant = Arc::new(room.occupy());
        tokio::spawn(async move {
            let on = occupant.clone();
            let service = service_fn(move |req| {
                let busy = on.request();
                handle(req, shared.clone(), busy)
            });
            let connection = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(CLIENT_TIMEOUT)
                // A head past it is a 431 (hyper's answer to a full read buffer before the head
                // ends); bodies are read through the buffer in pieces.
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let mut evicted = std::pin::pin!(occupant.evicted());
            let ended = std::future::poll_fn(|cx| {
                if let Poll::Ready(served) = connection.as_mut().poll(cx) {
                    return Poll::Ready(Some(served));
                }
                evicted.as_mut().poll(cx).map(|()| None)
            })
            .await;
            let served = match ended {
                Some(served) => served,
                // Asked to make room while serving: its request finishes first.
                None if occupant.busy() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
                // Idle: closed at once.
                None => Ok(()),
            };
            if let Err(e) = served {
                tracing::debug!("gateway: connection: {e}");
            }
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    busy: conns::Busy,
) -> Result<Response<BusyBody<AnswerBody>>, std::convert::Infallible> {
    let answer = answer(req, &shared).await;
    shared.metrics.answered(answer.status().as_u16());
    Ok(answer.map(|body| BusyBody::new(body, busy)))
}

/// Each upstream's learned concurrency, for `GET /metrics`.
fn render_learned(out: &mut String, policy: &str, shared: &Shared) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "# HELP xsched_gateway_upstream_learned_concurrency Requests admitted to the engine at once at most, learned from its throughput (--learn-concurrency).\n# TYPE xsched_gateway_upstream_learned_concurrency gauge"
    );
    for (u, limit) in shared
        .config
        .upstreams
        .iter()
        .zip(shared.admission.learned())
    {
        let name = u.to_string();
        let _ = writeln!(
            out,
            "xsched_gateway_upstream_learned_concurrency{{policy=\"{policy}\",upstream=\"{}\"}} {limit}",
            name.trim_end_matches('/')
        );
    }
}

/// What an oracle policy orders `req` by: the truth, which here is the length the request
/// states (a benchmark's `ignore_eos` with its bound); refused, naming the field, when it states
/// none. `None` under any other policy.
fn oracle_lengths(
    policy: &RequestPolicySpec,
    req: &request::Checked,
) -> Result<Option<SizeDistribution>, request::Invalid> {
    if policy.source != Source::Truth {
        return Ok(None);
    }
    req.stated_length()
        .and_then(|n| SizeDistribution::point(f64::from(n.max(1))))
        .map(Some)
        .ok_or_else(|| request::Invalid {
            field: "ignore_eos",
            reason: format!(
                "policy `{policy}` orders by each request's stated answer length; send \
                 `ignore_eos: true` with `max_tokens`"
            ),
        })
}

async fn answer(req: Request<Incoming>, shared: &Arc<Shared>) -> Response<AnswerBody> {
    let arrival = Instant::now();
    let endpoint = match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/chat/completions") => Endpoint::Chat,
        (&Method::POST, "/v1/completions") => Endpoint::Completions,
        (&Method::GET, "/metrics") => {
            let policy = shared.config.policy.to_string();
            let classes = &shared.config.classes;
            let mut text = shared.metrics.render(&policy, |t| classes.tenant_name(t));
            shared
                .upstreams
                .health()
                .render(&mut text, &format!("policy=\"{policy}\""));
            if let Some(e) = &shared.engines {
                e.render(&mut text, &format!("policy=\"{policy}\""));
            }
            if shared.config.learn_concurrency {
                render_learned(&mut text, &policy, shared);
            }
            let mut r = Response::new(
                http_body_util::Full::new(Bytes::from(text))
                    .map_err(|never| match never {})
                    .boxed(),
            );
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            return r;
        }
        (&Method::GET, "/v1/models") => {
            let (parts, _) = req.into_parts();
            return proxy::forward(&shared.upstreams, 0, &parts, Bytes::new(), None).await;
        }
        (_, path) => {
            let message = format!(
                "no route {path}: the gateway serves /v1/chat/completions, /v1/completions and /v1/models"
            );
            return proxy::error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                &message,
                None,
            );
        }
    };
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(CLIENT_TIMEOUT, body::read(body, MAX_BODY, MAX_DRAIN)).await;
    let body = match read {
        Err(_) => {
            let message = format!("body: not sent within {} s", CLIENT_TIMEOUT.as_secs());
            return proxy::error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                &message,
                Some("body"),
            );
        }
        Ok(Ok(b)) => b,
        Ok(Err(e @ Unread::TooLarge { drained, .. })) => {
            let mut r = proxy::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                &format!("body: {e}"),
                Some("body"),
            );
            if !drained {
                r.headers_mut().insert(
                    hyper::header::CONNECTION,
                    hyper::header::HeaderValue::from_static("close"),
                );
            }
            return r;
        }
        Ok(Err(e @ Unread::Failed(_))) => {
            return proxy::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("body: {e}"),
                Some("body"),
            );
        }
    };
    let read = Instant::now();
    let hash = shared.config.router.needs_prefix();
    let checked = if body.len() > CHECK_INLINE_BYTES {
        // Parsing a body of megabytes takes milliseconds: on the blocking pool, so the
        // runtime's one thread goes on passing other answers' events.
        let big = body.clone();
        match tokio::task::spawn_blocking(move || request::check_hashing(endpoint, &big, hash))
            .await
        {
            Ok(checked) => checked,
            Err(e) => {
                return proxy::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    &format!("checking the request: {e}"),
                    None,
                );
            }
        }
    } else {
        request::check_hashing(endpoint, &body, hash)
    };
    let checked = checked.and_then(|c| {
        let stated = oracle_lengths(&shared.config.policy, &c)?;
        Ok((c, stated))
    });
    let (checked, stated) = match checked {
        Ok(c) => c,
        Err(e) => {
            return proxy::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &e.to_string(),
                Some(e.field),
            );
        }
    };
    let stream = checked.stream;
    let classes = &shared.config.classes;
    let (class, tenant, ttft_slo) = match classes
        .class_of(&parts.headers, checked.priority)
        .and_then(|c| {
            let slo = classes::ttft_slo_of(&parts.headers)?;
            Ok((c, classes.tenant_of(&parts.headers)?, slo))
        }) {
        Ok(ct) => ct,
        Err(e) => {
            return proxy::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &e.to_string(),
                Some(e.header),
            );
        }
    };
    let ticket = match classes.open(tenant) {
        Ok(t) => t,
        Err(limit) => {
            return proxy::error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                &limit,
                None,
            );
        }
    };
    if let Some(refused) = shared.admission.full(class) {
        // Refused before its prompt is embedded: a flood costs no prediction work.
        return proxy::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            &refused.to_string(),
            None,
        );
    }
    let learns = checked.choices == 1;
    let forecast = match &shared.forecaster {
        // Embedding the prompt and scanning the history are CPU work: off the runtime's threads.
        Some(f) => {
            let (f, req) = (f.clone(), checked.clone());
            match tokio::task::spawn_blocking(move || f.forecast(&req)).await {
                Ok(forecast) => Some(forecast),
                Err(e) => {
                    return proxy::error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        &format!("predicting the request: {e}"),
                        None,
                    );
                }
            }
        }
        None => None,
    };
    // With several choices an answer's tokens are not one answer's length. Tenants that share
    // by tokens need each answer's count; the predictor needs it too. So does learning each
    // engine's concurrency from its throughput, and a request of a class other than the
    // standard: its first token lets sheddable requests (back) onto its engine.
    let counts = learns
        && (forecast.is_some()
            || classes.shared()
            || shared.config.learn_concurrency
            || class != 0);
    let job = Arrival {
        id: 0,
        input_tokens: forecast.as_ref().map_or_else(
            || ((checked.context_chars as f64 * TOKENS_PER_CHAR).round() as u32).max(1),
            |f| f.input,
        ),
        max_tokens: checked.output_bound(),
        priority: class,
        tenant,
        lengths: stated.or_else(|| forecast.as_ref().map(|f| f.lengths.clone())),
        // Counted from its arrival, before its body was read, checked and predicted.
        ttft_slo: ttft_slo.map(|d| d.saturating_sub(arrival.elapsed()).as_secs_f64()),
        prefix: checked.prefix.clone(),
        reports_first_token: stream && counts,
    };
    let placed_at = Instant::now();
    let slot = match shared.admission.admit(job).await {
        Ok(slot) => slot,
        Err(e @ Refused::Full(_)) => {
            return proxy::error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                &e.to_string(),
                None,
            );
        }
        Err(e @ Refused::Shed) => {
            shared.metrics.shed(metrics::band(class));
            let mut r = proxy::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                &e.to_string(),
                None,
            );
            r.headers_mut().insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from_static("1"),
            );
            return r;
        }
        Err(e @ Refused::Closed) => {
            return proxy::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                &e.to_string(),
                None,
            );
        }
    };
    let admitted = Instant::now();
    shared.metrics.queued(admitted - arrival);
    shared.metrics.tenant_request(tenant);
    let upstream = slot.upstream();
    let predictor = shared.forecaster.clone().zip(forecast);
    let tracked = Tracked {
        slot,
        timing: Timing {
            metrics: shared.metrics.clone(),
            arrival,
            band: metrics::band(class),
            tenant,
            ttft_slo,
        },
        learning: counts.then(|| Learning {
            predictor,
            admission: shared.admission.clone(),
            tally: Tally::new(stream),
            admitted,
            first_byte: None,
        }),
        ticket: Some(ticket),
    };
    shared
        .metrics
        .own_time((placed_at - read) + admitted.elapsed());
    proxy::forward(&shared.upstreams, upstream, &parts, body, Some(tracked)).await
}
