//! The HTTP part: each route a small handler returning `Result<_, ApiError>`.
//!
//! `POST /v1/chat/completions` and `POST /v1/completions` go through the same steps: the body
//! is read within its bound, checked, classed (its class, tenant and TTFT deadline), refused
//! early if the queue is full (before any prediction work), predicted, admitted by the core,
//! and forwarded to the upstream the core chose; the answer is relayed back with the
//! per-request object (`life.rs`) following it. `GET /v1/models` goes straight to the first
//! upstream, `GET /metrics` is rendered here, and anything else is a 404.

use crate::body;
use crate::classes;
use crate::config::{MAX_BODY, MAX_DRAIN};
use crate::error::{AnswerBody, ApiError, EVICTED};
use crate::forecast::{Forecast, TOKENS_PER_CHAR};
use crate::life::{Learning, Life, Timing};
use crate::metrics;
use crate::numbers;
use crate::relay::{self, Origin};
use crate::request::{self, Checked, Endpoint};
use crate::request_queue::{RequestRefused, Slot, Taken};
use crate::shared::GatewayState;
use crate::tally::Tally;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_llm_core::{Arrival, SizeDistribution};

/// Bodies up to this size are checked on the runtime's thread (tens of µs); larger ones on the
/// blocking pool.
const CHECK_INLINE_BYTES: usize = 64 << 10;

/// Answer `req`.
pub(crate) async fn route(
    req: Request<Incoming>,
    shared: &Arc<GatewayState>,
) -> Response<AnswerBody> {
    let answered = match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/chat/completions") => complete(req, Endpoint::Chat, shared).await,
        (&Method::POST, "/v1/completions") => complete(req, Endpoint::Completions, shared).await,
        (&Method::GET, "/metrics") => Ok(metrics_page(shared)),
        (&Method::GET, "/v1/models") => models(req, shared).await,
        (_, path) => Err(ApiError::no_route(path)),
    };
    answered.unwrap_or_else(ApiError::into_response)
}

/// `GET /v1/models`: the first upstream's answer, passed through.
async fn models(
    req: Request<Incoming>,
    shared: &GatewayState,
) -> Result<Response<AnswerBody>, ApiError> {
    let (parts, _) = req.into_parts();
    let answer = shared.upstreams.send(0, &parts, Bytes::new()).await?;
    Ok(relay::relay(answer, origin(shared, 0), ()))
}

/// `GET /metrics`: the gateway's own, its upstreams' health, engines and learned limits.
fn metrics_page(shared: &GatewayState) -> Response<AnswerBody> {
    let text = metrics_text(shared);
    let mut r = Response::new(
        http_body_util::Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

/// The Prometheus page: queue wait, TTFT, TTLT, the predictor, upstreams' health and engines.
pub(crate) fn metrics_text(shared: &GatewayState) -> String {
    let policy = shared.config.policy.to_string();
    let label = format!("policy=\"{policy}\"");
    let classes = &shared.config.classes;
    let mut text = shared.metrics.render(&policy, |t| classes.tenant_name(t));
    shared.upstreams.health().render(&mut text, &label);
    if let Some(e) = &shared.engines {
        e.render(&mut text, &label);
    }
    if shared.config.learn_concurrency {
        let names = (0..shared.config.upstreams.len()).map(|u| shared.upstreams.name(u));
        metrics::render_learned(&mut text, &policy, names.zip(shared.admission.learned()));
    }
    text
}

/// Upstream `u` as the relay reports it.
fn origin(shared: &GatewayState, u: usize) -> Origin {
    Origin {
        health: shared.upstreams.health().clone(),
        index: u,
        name: shared.upstreams.name(u),
        idle: shared.upstreams.idle(),
    }
}

/// Who sent a request: its class, tenant and TTFT deadline.
struct Who {
    class: i32,
    tenant: usize,
    ttft_slo: Option<Duration>,
}

/// A completion: checked, classed, predicted, admitted, forwarded.
async fn complete(
    req: Request<Incoming>,
    endpoint: Endpoint,
    shared: &Arc<GatewayState>,
) -> Result<Response<AnswerBody>, ApiError> {
    let arrival = Instant::now();
    let (parts, body) = req.into_parts();
    let body = read_body(body, shared.config.client_timeout).await?;
    let placed = place(shared, endpoint, &parts.headers, &body, arrival, &[]).await?;
    forward(shared, placed.upstream, &parts, body, placed.life).await
}

/// A request the core admitted: the upstream it chose, and the request's life from here.
pub(crate) struct Placed {
    pub upstream: usize,
    pub life: Life,
}

/// A completion's body (read whole, the request arrived at `arrival`) checked, classed,
/// refused early if the queue is full, predicted and admitted to one of `engines` (empty: any):
/// every decision the gateway and the endpoint picker (`epp`) make before a request goes to an
/// engine.
pub(crate) async fn place(
    shared: &Arc<GatewayState>,
    endpoint: Endpoint,
    headers: &hyper::HeaderMap,
    body: &Bytes,
    arrival: Instant,
    engines: &[usize],
) -> Result<Placed, ApiError> {
    let read = Instant::now();
    let checked = check(shared, endpoint, body).await?;
    let stated = shared
        .config
        .policy
        .stated_lengths(checked.stated_length())
        .map_err(|e| ApiError::invalid("ignore_eos", format!("ignore_eos: {e}")))?;
    let who = classify(shared, headers, &checked)?;
    if let Some(refused) = shared.admission.refusal(who.class, who.tenant) {
        // Refused before its prompt is embedded: a flood costs no prediction work.
        return Err(refusal(shared, refused, &who));
    }
    let forecast = predict(shared, &checked).await?;
    let counts = counts(shared, &checked, &forecast, who.class);
    let mut job = arrival_of(&checked, &who, arrival, stated, forecast.as_ref(), counts);
    job.engines = engines.to_vec();
    let placed_at = Instant::now();
    let slot = admit(shared, job, &who).await?;
    let admitted = Instant::now();
    shared.metrics.queued(admitted - arrival);
    shared.metrics.tenant_request(who.tenant);
    let upstream = slot.upstream();
    let timing = Timing {
        metrics: shared.metrics.clone(),
        arrival,
        band: metrics::band(who.class),
        tenant: who.tenant,
        ttft_slo: who.ttft_slo,
    };
    let learning = counts.then(|| Learning {
        predictor: shared.forecaster.clone().zip(forecast),
        admission: shared.admission.clone(),
        tally: Tally::new(checked.stream),
        admitted,
        first_byte: None,
    });
    let life = Life::new(slot, timing, learning);
    shared
        .metrics
        .own_time((placed_at - read) + admitted.elapsed());
    Ok(Placed { upstream, life })
}

/// The body, read within its bound and the client's time.
async fn read_body(body: Incoming, within: Duration) -> Result<Bytes, ApiError> {
    tokio::time::timeout(within, body::read(body, MAX_BODY, MAX_DRAIN))
        .await
        .map_err(|_| ApiError::body_timeout(within))?
        .map_err(ApiError::from)
}

/// The body checked (a large one on the blocking pool: parsing megabytes takes milliseconds,
/// and the runtime's one thread goes on passing other answers' events meanwhile).
async fn check(
    shared: &GatewayState,
    endpoint: Endpoint,
    body: &Bytes,
) -> Result<Checked, ApiError> {
    let hash = shared.config.router.needs_prefix();
    if body.len() <= CHECK_INLINE_BYTES {
        return Ok(request::check_hashing(endpoint, body, hash)?);
    }
    let big = body.clone();
    let checked = tokio::task::spawn_blocking(move || request::check_hashing(endpoint, &big, hash))
        .await
        .map_err(|e| ApiError::internal(format!("checking the request: {e}")))?;
    Ok(checked?)
}

/// `body` with its `priority` set to `number` or removed (`numbers.rs`); a large one on the
/// blocking pool, as [`check`] reads it.
async fn stamp(body: &Bytes, number: Option<i64>) -> Result<Bytes, ApiError> {
    if body.len() <= CHECK_INLINE_BYTES {
        return numbers::stamped(body, number);
    }
    let big = body.clone();
    tokio::task::spawn_blocking(move || numbers::stamped(&big, number))
        .await
        .map_err(|e| ApiError::internal(format!("numbering the request: {e}")))?
}

/// The request's class, tenant and TTFT deadline, from its headers and body.
fn classify(
    shared: &GatewayState,
    headers: &hyper::HeaderMap,
    checked: &Checked,
) -> Result<Who, ApiError> {
    let classes = &shared.config.classes;
    Ok(Who {
        class: classes.class_of(headers, checked.priority)?,
        ttft_slo: classes::ttft_slo_of(headers)?,
        tenant: classes.tenant_of(headers)?,
    })
}

/// What is predicted of the request, when the gateway predicts: embedding the prompt and
/// scanning the history are CPU work, off the runtime's thread.
async fn predict(shared: &GatewayState, checked: &Checked) -> Result<Option<Forecast>, ApiError> {
    let Some(f) = &shared.forecaster else {
        return Ok(None);
    };
    let (f, req) = (f.clone(), checked.clone());
    tokio::task::spawn_blocking(move || f.forecast(&req))
        .await
        .map(Some)
        .map_err(|e| ApiError::internal(format!("predicting the request: {e}")))
}

/// Whether the answer's tokens are counted as it passes. With several choices an answer's
/// tokens are not one answer's length. Tenants that share by tokens need each answer's count;
/// the predictor needs it too. So does learning each engine's concurrency from its throughput,
/// and a request of a class other than the standard: its first token lets sheddable requests
/// (back) onto its engine.
fn counts(
    shared: &GatewayState,
    checked: &Checked,
    forecast: &Option<Forecast>,
    class: i32,
) -> bool {
    checked.choices == 1
        && (forecast.is_some()
            || shared.config.classes.shared()
            || shared.config.learn_concurrency
            || class != 0)
}

/// What the core is told of the request.
fn arrival_of(
    checked: &Checked,
    who: &Who,
    arrival: Instant,
    stated: Option<SizeDistribution>,
    forecast: Option<&Forecast>,
    counts: bool,
) -> Arrival {
    let estimated = ((checked.context_chars as f64 * TOKENS_PER_CHAR).round() as u32).max(1);
    Arrival {
        id: 0,
        input_tokens: forecast.map_or(estimated, |f| f.input),
        max_tokens: checked.output_bound(),
        priority: who.class,
        tenant: who.tenant,
        lengths: stated.or_else(|| forecast.map(|f| f.lengths.clone())),
        // Counted from its arrival, before its body was read, checked and predicted.
        ttft_slo: who
            .ttft_slo
            .map(|d| d.saturating_sub(arrival.elapsed()).as_secs_f64()),
        prefix: checked.prefix.clone(),
        reports_first_token: checked.stream && counts,
        engines: Vec::new(),
    }
}

/// Wait for the core to admit the request.
async fn admit(shared: &GatewayState, job: Arrival, who: &Who) -> Result<Slot, ApiError> {
    let admitted = shared.admission.admit(job).await;
    admitted.map_err(|e| refusal(shared, e, who))
}

/// The answer to the core's refusal of `who`'s request: a shed is counted, a tenant's limit
/// named.
fn refusal(shared: &GatewayState, e: RequestRefused, who: &Who) -> ApiError {
    match e {
        RequestRefused::Shed(_) => shared.metrics.shed(metrics::band(who.class)),
        RequestRefused::TenantLimit => {
            let classes = &shared.config.classes;
            let name = classes.tenant_name(who.tenant);
            let max = classes.limits().get(who.tenant).copied().flatten();
            let max = max.map_or_else(|| "its".to_string(), |m| m.to_string());
            let message = format!(
                "tenant `{name}` has {max} requests waiting or in flight, its max_requests"
            );
            return ApiError {
                refused: Some(e),
                ..ApiError::rate_limited(message)
            };
        }
        _ => {}
    }
    ApiError::from(e)
}

/// Send the admitted request to its upstream and relay the answer, with `life` following it.
/// A request evicted before its answer began gets a 503 with `Retry-After`; one taken back from
/// an engine that stopped answering is sent where the core admits it next (or gets a 503 when
/// no engine answers).
async fn forward(
    shared: &GatewayState,
    mut u: usize,
    parts: &hyper::http::request::Parts,
    body: Bytes,
    mut life: Life,
) -> Result<Response<AnswerBody>, ApiError> {
    let mut body = body;
    loop {
        let number = life.engine_priority();
        let sending = match number {
            Some(n) => stamp(&body, Some(n)).await?,
            None => body.clone(),
        };
        let sent = life
            .unless_taken(shared.upstreams.send(u, parts, sending))
            .await;
        match sent {
            Ok(Ok(answer)) if number.is_some() && answer.status() == StatusCode::BAD_REQUEST => {
                let (status, kind, bytes) = numbers::read_error(answer).await;
                if !numbers::refuses_numbers(&bytes) {
                    // The engine's own refusal (a prompt beyond its window): passed on.
                    life.unanswered();
                    return Ok(numbers::passed_on(status, kind, bytes));
                }
                if life.refuses_numbers() {
                    tracing::warn!(
                        "upstream {} refuses `priority` (start vLLM with --scheduling-policy \
                         priority for --order-at engine); its requests are ordered in the \
                         gateway's queue from now",
                        shared.upstreams.name(u)
                    );
                }
                body = stamp(&body, None).await?;
            }
            Ok(Ok(answer)) => {
                life.answered_with(answer.status());
                return Ok(relay::relay(answer, origin(shared, u), life));
            }
            Ok(Err(e)) => {
                life.unanswered();
                return Err(e);
            }
            // The request to the engine is dropped with its connection.
            Err(Taken::Displaced) => {
                life.evicted();
                return Err(ApiError::unavailable(EVICTED, true));
            }
            Err(Taken::Requeued(next)) => match next.await {
                Ok(Ok(to)) => {
                    life.moved(to);
                    u = to;
                }
                Ok(Err(refused)) => {
                    life.unanswered();
                    return Err(refused.into());
                }
                Err(_) => {
                    life.unanswered();
                    return Err(RequestRefused::Closed.into());
                }
            },
        }
    }
}
