//! Forwarding one admitted request to its upstream and its answer back, unchanged: the method,
//! path, query, body and the headers that matter (content type, authorization, accept) go up;
//! the status, headers and body (streamed chunk by chunk, so server-sent events arrive as the
//! engine sends them) come down. The request's [`Slot`] rides with the answer's body and is
//! freed when the body ends or is dropped, so a client that disconnects mid-stream frees its
//! engine slot (the upstream connection is dropped with it, which the engine sees). A successful
//! answer that ends whole is tallied on its way (`tally.rs`) and the predictor learns from it.
//!
//! No upstream can hang a client: the answer's head must come within the first-byte timeout (a
//! 504 after), and a body that falls silent for the idle timeout is ended (a stream with an
//! error event, any other body cut), its slot freed and its upstream reported to [`Health`]. A
//! request that fails before any answer byte on a pooled connection is sent once more on a new
//! one: engines may close a kept-alive connection just as it is handed to the next request
//! (llama.cpp's server does, right after a stream's last chunk).

use crate::admission::{RequestQueue, Slot};
use crate::forecast::{Forecast, Forecaster};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::tally::Tally;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
pub use hyper::Uri;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Why an answer's body failed (the engine's connection, or the idle timeout).
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every answer the gateway gives.
pub type AnswerBody = BoxBody<Bytes, BodyError>;

/// The HTTP client the gateway talks to upstreams with.
pub type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// How long connecting to an upstream may take before the request gets a 502.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an idle pooled connection to an upstream is kept (under llama.cpp's server's 5 s
/// keep-alive, so the gateway never reuses one the engine is closing).
pub const POOL_IDLE: Duration = Duration::from_secs(4);

/// How long an upstream may take, by default, to send an answer's head (a complete answer is
/// sent whole, so this bounds a whole non-streamed generation) and to send the next chunk of a
/// body.
pub const TIMEOUTS: Timeouts = Timeouts {
    first_byte: Duration::from_secs(300),
    idle: Duration::from_secs(60),
};

/// How long an upstream may keep a request waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From sending the request to the answer's head (a 504 after).
    pub first_byte: Duration,
    /// Between two chunks of the answer's body (the body is ended after).
    pub idle: Duration,
}

/// A client (HTTP/1.1) that keeps up to `pooled` idle connections per upstream. Must be called
/// in a tokio runtime.
pub fn client(pooled: usize) -> UpstreamClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_keepalive(Some(Duration::from_secs(30)));
    connector.set_nodelay(true);
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(pooled)
        .build(connector)
}

/// The upstreams, the clients that reach them, and how long they may take.
pub struct Upstreams {
    uris: Vec<Uri>,
    /// Connections kept alive between requests.
    pooled: UpstreamClient,
    /// A new connection for each request (the retry's).
    fresh: UpstreamClient,
    timeouts: Timeouts,
    health: Arc<Health>,
}

impl Upstreams {
    /// `uris`, reported to `health`. Must be called in a tokio runtime.
    pub fn new(uris: Vec<Uri>, timeouts: Timeouts, health: Arc<Health>) -> Upstreams {
        Upstreams {
            uris,
            pooled: client(usize::MAX),
            fresh: client(0),
            timeouts,
            health,
        }
    }

    /// Their health.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1): never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// Drop the hop-by-hop headers from an upstream answer (and those its `Connection` names), and
/// its framing, which the gateway's own connection sets.
fn strip_hop_by_hop(headers: &mut hyper::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|n| n.trim().to_ascii_lowercase()))
        .collect();
    for name in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(name);
    }
    headers.remove(hyper::header::TRANSFER_ENCODING);
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

/// When a request arrived, and where its answer's first and last byte are recorded.
pub struct Timing {
    /// The gateway's metrics.
    pub metrics: Arc<Metrics>,
    /// The request's arrival.
    pub arrival: Instant,
    /// Its class band (`metrics::band`).
    pub band: usize,
    /// Its tenant.
    pub tenant: usize,
    /// Its TTFT deadline, if it asked for one.
    pub ttft_slo: Option<std::time::Duration>,
}

/// What is learned from a request's answer: its length for its tenant's share and, when the
/// gateway predicts, for the predictor.
pub struct Learning {
    /// Who learns the answer's length and what was predicted of it, when the gateway predicts.
    pub predictor: Option<(Arc<Forecaster>, Forecast)>,
    /// Who learns its service time.
    pub admission: Arc<RequestQueue>,
    /// The answer's tally (streamed or not, as the request asked).
    pub tally: Tally,
    /// When it was admitted (its service starts).
    pub admitted: Instant,
    /// When its answer's first byte came (set on the way).
    pub first_byte: Option<Instant>,
}

/// What rides with a scheduled request's answer.
pub struct Tracked {
    /// Its slot, freed when the answer ends.
    pub slot: Slot,
    /// Its times.
    pub timing: Timing,
    /// Learning from it, when the gateway predicts or tenants share by tokens.
    pub learning: Option<Learning>,
    /// Its place among its tenant's open requests.
    pub ticket: Option<crate::classes::Ticket>,
}

/// Send `body` to upstream `u` + `path_and_query` like the client's request `parts`, and answer
/// with the upstream's answer (its body carrying what is `tracked`), a 502 saying why the
/// upstream could not be reached, or a 504 when it sent no answer in time.
pub async fn forward(
    upstreams: &Upstreams,
    u: usize,
    parts: &hyper::http::request::Parts,
    body: Bytes,
    tracked: Option<Tracked>,
) -> Response<AnswerBody> {
    let base = &upstreams.uris[u];
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
    let request = || {
        let mut up = Request::builder()
            .method(parts.method.clone())
            .uri(uri.clone());
        for name in [CONTENT_TYPE, AUTHORIZATION, ACCEPT] {
            if let Some(v) = parts.headers.get(&name) {
                up = up.header(name, v);
            }
        }
        up.body(Full::new(body.clone()))
    };
    let deadline = tokio::time::Instant::now() + upstreams.timeouts.first_byte;
    let send = |client: &UpstreamClient| {
        let sent = request().map(|r| client.request(r));
        async move {
            match sent {
                Ok(sending) => Some(tokio::time::timeout_at(deadline, sending).await),
                Err(_) => None,
            }
        }
    };
    let mut tracked = tracked;
    let mut eviction = tracked.as_mut().and_then(|t| t.slot.eviction());
    let sending = async {
        let mut sent = send(&upstreams.pooled).await;
        if let Some(Ok(Err(e))) = &sent
            && !e.is_connect()
        {
            // Failed before any answer byte, on a connection that may have been pooled: once
            // more on a new one.
            tracing::debug!("upstream {base}: {e}; retrying on a new connection");
            sent = send(&upstreams.fresh).await;
        }
        sent
    };
    let Some(sent) = unless_evicted(sending, &mut eviction).await else {
        // Evicted before its answer began: the request to the engine is dropped with its
        // connection, and the slot with `tracked`.
        if let Some(t) = &tracked {
            t.timing.metrics.evicted(t.timing.band);
        }
        let mut r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            EVICTED,
            None,
        );
        r.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let answer = match sent {
        Some(Ok(Ok(answer))) => answer,
        // Headers copied from a request hyper parsed are valid.
        None => {
            return error(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                &format!("upstream {base}: the request could not be built"),
                None,
            );
        }
        Some(Ok(Err(e))) => {
            let why = format!("upstream {base} failed: {e}");
            tracing::warn!("{why}");
            upstreams.health.failed(u, &why);
            return error(StatusCode::BAD_GATEWAY, "upstream_error", &why, None);
        }
        Some(Err(_)) => {
            let why = format!(
                "upstream {base} sent no answer within {} s",
                upstreams.timeouts.first_byte.as_secs_f64()
            );
            tracing::warn!("{why}");
            upstreams.health.failed(u, &why);
            return error(StatusCode::GATEWAY_TIMEOUT, "upstream_error", &why, None);
        }
    };
    upstreams.health.answered(u);
    let (mut parts, body) = answer.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let (slot, timing, learning, ticket) = match tracked {
        Some(t) => (Some(t.slot), Some(t.timing), t.learning, t.ticket),
        None => (None, None, None, None),
    };
    let event_stream = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let idle = upstreams.timeouts.idle;
    let guarded = Guarded {
        body: Some(body),
        slot,
        timing,
        // Errors are not answers to learn lengths from.
        learning: learning.filter(|_| parts.status.is_success()),
        first: false,
        charged: 0,
        silence: Silence {
            limit: idle,
            last: Instant::now(),
            timer: Box::pin(tokio::time::sleep(idle)),
        },
        event_stream,
        upstream: (upstreams.health.clone(), u, base.to_string()),
        _ticket: ticket,
        gather: Gather::default(),
        evicted: eviction,
    };
    Response::from_parts(parts, guarded.boxed())
}

/// How long an answer's body has been silent.
struct Silence {
    limit: Duration,
    /// The last chunk (or the head).
    last: Instant,
    /// Fires at the earliest the silence could reach its limit (re-armed from `last` then, so
    /// a chunk costs a clock read, not a timer reset).
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Silence {
    /// Whether the body has now been silent for the limit (else the timer is re-armed).
    fn poll_over(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last + self.limit;
            if due <= Instant::now() {
                return true;
            }
            self.timer.as_mut().reset(due.into());
        }
    }
}

/// An upstream answer's body with the slot it holds, recording its first and last byte and
/// tallying it for the predictor.
struct Guarded {
    /// The upstream's body; `None` once it fell silent too long (its connection dropped).
    body: Option<Incoming>,
    slot: Option<Slot>,
    timing: Option<Timing>,
    learning: Option<Learning>,
    first: bool,
    /// Output tokens its tenant has been charged for so far (a stream's, as they pass).
    charged: u32,
    silence: Silence,
    /// Server-sent events, which can end with an error event.
    event_stream: bool,
    /// Whom to report a silent upstream to, its index and its name.
    upstream: (Arc<Health>, usize, String),
    /// Held until the answer ends.
    _ticket: Option<crate::classes::Ticket>,
    /// What is taken from the engine and not yet passed on.
    gather: Gather,
    /// Fires when a higher class evicts the request.
    evicted: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// A streamed answer's tokens are charged to its tenant at the first and then every this many as
/// they pass (VTC counts service as it is given: charged only at the end, a tenant's answers in
/// flight would look like service not yet received, and one cut short would never be charged).
const CHARGE_STEP: u32 = 16;

impl Guarded {
    /// A chunk of the answer came: its first byte's time, and the tally.
    fn saw(&mut self, data: &[u8]) {
        if !self.first {
            self.first = true;
            if let Some(t) = &self.timing {
                t.metrics
                    .first_byte(t.band, t.arrival.elapsed(), t.ttft_slo);
            }
        }
        let Some(l) = &mut self.learning else {
            return;
        };
        l.first_byte.get_or_insert(self.silence.last);
        l.tally.feed(data);
        let passed = l.tally.text_events();
        // The first token too: the core holds sheddable requests back from an engine while a
        // higher class's request there waits for its first.
        if passed >= self.charged.saturating_add(CHARGE_STEP) || (self.charged == 0 && passed > 0) {
            self.charge_passed();
        }
    }

    /// Charge the tenant for the stream's output tokens that passed and are not charged yet.
    fn charge_passed(&mut self) {
        let (Some(l), Some(slot)) = (&self.learning, &self.slot) else {
            return;
        };
        let passed = l.tally.text_events();
        if passed > self.charged {
            slot.charge(passed);
            if let Some(t) = &self.timing {
                t.metrics.tenant_tokens(t.tenant, passed - self.charged);
            }
            self.charged = passed;
        }
    }

    /// The body ended or was dropped: record it once.
    fn end(&mut self) {
        if let Some(t) = self.timing.take() {
            t.metrics.last_byte(t.band, t.arrival.elapsed());
        }
    }

    /// The body ended, or was dropped: learn from it if the tally says it is whole.
    fn learn(&mut self) {
        // What passed is charged even when the stream says nothing of the answer's length.
        self.charge_passed();
        let Some(l) = self.learning.take() else {
            return;
        };
        // A complete answer's first byte is its end's: only a stream's times its prefill.
        let first_byte = l
            .first_byte
            .filter(|_| l.tally.streamed())
            .map(|f| f - l.admitted);
        let Some(counted) = l.tally.finish() else {
            return;
        };
        if let Some(slot) = &self.slot {
            if let Some(p) = counted.prompt_tokens {
                slot.prompt(p);
            }
            slot.charge(counted.output_tokens);
            let service_s = l.admitted.elapsed().as_secs_f64();
            l.admission
                .answered(slot.upstream(), counted.output_tokens, service_s);
        }
        if let Some(t) = &self.timing {
            // Those charged as they passed are counted already.
            let more = counted.output_tokens.saturating_sub(self.charged);
            t.metrics.tenant_tokens(t.tenant, more);
        }
        if let Some((forecaster, forecast)) = l.predictor {
            l.admission.served(xsched_llm_core::service::Served {
                prompt_tokens: counted.prompt_tokens.unwrap_or(forecast.input),
                output_tokens: counted.output_tokens,
                total_s: l.admitted.elapsed().as_secs_f64(),
                first_token_s: first_byte.map(|d| d.as_secs_f64()),
            });
            // Learning takes the predictor's lock, which a prediction holds for its scan: off
            // the runtime's threads.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(move || forecaster.learn(forecast, counted))),
                Err(_) => forecaster.learn(forecast, counted),
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // A client may close as soon as it has read a stream's `[DONE]`, before the body's
        // last frame is polled: what the tally saw decides (a stream counts only if it said it
        // finished, a complete answer only if its JSON parses whole).
        self.learn();
        self.end();
    }
}

impl Guarded {
    /// The upstream fell silent: report it, free the slot, drop its connection, and end the
    /// answer (a stream with an error event that says why, any other body with an error).
    fn silent(&mut self) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let (health, u, name) = &self.upstream;
        let why = format!(
            "upstream {name} sent nothing for {} s",
            self.silence.limit.as_secs_f64()
        );
        tracing::warn!("{why}");
        health.failed(*u, &why);
        self.cut(why, 504)
    }

    /// A higher class evicted this request: free the slot, drop its connection (the engine
    /// stops it), and end the answer after what was already read, the same way.
    fn evict(&mut self) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(t) = &self.timing {
            t.metrics.evicted(t.band);
        }
        self.cut(EVICTED.to_string(), 503)
    }

    fn cut(&mut self, why: String, code: u16) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.charge_passed();
        self.body = None;
        self.learning = None;
        self.slot = None;
        self.evicted = None;
        self.end();
        if self.event_stream {
            let kind = if code == 503 {
                "server_error"
            } else {
                "upstream_error"
            };
            let event = serde_json::json!({"error": {"message": why, "type": kind, "code": code}});
            self.gather
                .held
                .extend_from_slice(format!("data: {event}\n\n").as_bytes());
            Poll::Ready(self.gather.release().map(Ok))
        } else {
            self.gather.release_then(Some(Err(why.into())))
        }
    }
}

/// What an evicted request's client is told (a 503 with `Retry-After` before its answer
/// began, an error event after).
pub const EVICTED: &str =
    "evicted: a request of a higher class needed the engine's slot; retry later";

/// `future`, unless `evicted` fires first.
async fn unless_evicted<F: Future>(
    future: F,
    evicted: &mut Option<tokio::sync::oneshot::Receiver<()>>,
) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if let Some(rx) = evicted {
            match Pin::new(rx).poll(cx) {
                Poll::Ready(Ok(())) => return Poll::Ready(None),
                Poll::Ready(Err(_)) => *evicted = None,
                Poll::Pending => {}
            }
        }
        future.as_mut().poll(cx).map(Some)
    })
    .await
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Some(stashed) = this.gather.stashed.take() {
            return Poll::Ready(stashed);
        }
        if let Some(rx) = &mut this.evicted {
            match Pin::new(rx).poll(cx) {
                Poll::Ready(Ok(())) => return this.evict(),
                Poll::Ready(Err(_)) => this.evicted = None,
                Poll::Pending => {}
            }
        }
        loop {
            let Some(body) = &mut this.body else {
                return Poll::Ready(None);
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    this.silence.last = Instant::now();
                    let other = match frame.into_data() {
                        Ok(data) => {
                            this.saw(&data);
                            this.gather.held.extend_from_slice(&data);
                            None
                        }
                        Err(trailers) => Some(trailers),
                    };
                    // A sized body's last frame: the server may not poll again.
                    let ended = this.body.as_ref().is_none_or(Body::is_end_stream);
                    if ended {
                        this.learn();
                    }
                    if let Some(other) = other {
                        return this.gather.release_then(Some(Ok(other)));
                    }
                    if ended || this.gather.held.len() >= GATHER_BYTES {
                        return Poll::Ready(this.gather.release().map(Ok));
                    }
                }
                Poll::Ready(None) => {
                    this.learn();
                    this.end();
                    return this.gather.release_then(None);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.charge_passed();
                    this.learning = None;
                    this.end();
                    return this.gather.release_then(Some(Err(e.into())));
                }
                Poll::Pending if this.gather.held.is_empty() => {
                    if this.silence.poll_over(cx) {
                        return this.silent();
                    }
                    return Poll::Pending;
                }
                Poll::Pending => {
                    if this.gather.wait_for_more() {
                        // The engine's connection runs on this thread's queue before this task
                        // is polled again: what it has read already comes in the meantime.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    return Poll::Ready(this.gather.release().map(Ok));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.gather.held.is_empty()
            && self.gather.stashed.is_none()
            && self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) if self.gather.held.is_empty() => body.size_hint(),
            Some(_) => SizeHint::default(),
            None => SizeHint::with_exact(0),
        }
    }
}

/// The most bytes of an answer gathered into one frame for the client.
const GATHER_BYTES: usize = 16 * 1024;

/// How many times in a row the engine's connection may bring nothing before what is held is
/// passed on. hyper polls a body twice in one turn when the first poll wrote nothing (so one
/// empty poll is not yet a turn given to the engine's connection), and a second turn without
/// data means it has none: the answer then goes out at once.
const EMPTY_POLLS: u8 = 3;

/// Answer data taken from the engine's connection and not yet passed on: when the engine sends
/// faster than events are passed on one by one (a burst read in one go from its socket), the
/// client gets them in one write instead of one write each (measured: 9.4 µs per event before,
/// 5.2 after; docs/BENCHMARKS.md). An answer whose events come apart loses nothing: each goes
/// out as soon as the engine's connection has nothing more, one task turn later.
#[derive(Default)]
struct Gather {
    held: bytes::BytesMut,
    /// How much was held at the last poll that found nothing more.
    held_at_last_empty: usize,
    /// Polls in a row that found nothing more.
    empty: u8,
    /// What the engine's body said after the held data (its end, an error or trailers), for
    /// the next poll.
    stashed: Option<Option<Result<Frame<Bytes>, BodyError>>>,
}

impl Gather {
    /// The engine's connection had nothing more this poll: whether to wait for it once more.
    fn wait_for_more(&mut self) -> bool {
        if self.held.len() > self.held_at_last_empty {
            self.empty = 0;
        }
        self.held_at_last_empty = self.held.len();
        self.empty += 1;
        self.empty < EMPTY_POLLS
    }

    /// The held data as one frame, if any.
    fn release(&mut self) -> Option<Frame<Bytes>> {
        self.held_at_last_empty = 0;
        self.empty = 0;
        (!self.held.is_empty()).then(|| Frame::data(self.held.split().freeze()))
    }

    /// The held data first, if any, and `next` at the next poll; else `next` now.
    fn release_then(
        &mut self,
        next: Option<Result<Frame<Bytes>, BodyError>>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.release() {
            Some(data) => {
                self.stashed = Some(next);
                Poll::Ready(Some(Ok(data)))
            }
            None => Poll::Ready(next),
        }
    }
}
