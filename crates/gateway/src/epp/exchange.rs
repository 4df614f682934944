//! One request's `ext_proc` stream, as Envoy sends it in `FULL_DUPLEX_STREAMED` mode: the
//! request's headers are kept, its body buffered to its end, and only then is it placed, by the
//! same path the gateway's own requests take (`routes::place`: checked, classed, refused early
//! when full, predicted, admitted in the policy's order). While it waits for admission the
//! stream is held: that is flow control, and the order requests leave it is the core's. The
//! answer is the chosen endpoint (headers and metadata), then the body passed back unchanged;
//! the response that follows is watched as the gateway watches its own (`life.rs`): its first
//! byte, its tokens, its end, which frees the engine's slot for the next request.

use super::messages as m;
use crate::config::MAX_BODY;
use crate::error::ApiError;
use crate::life::Life;
use crate::relay::{AnswerWatch, Ended};
use crate::request::Endpoint;
use crate::request_queue::RequestRefused;
use crate::routes::{self, Placed};
use crate::shared::GatewayState;
use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, HttpHeaders, ProcessingRequest, ProcessingResponse, processing_request::Request,
};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::Sender;
use tonic::{Status, Streaming};

/// Where the answers to one stream go.
pub(crate) type Out = Sender<Result<ProcessingResponse, Status>>;

/// The stream ended, or its answers can no longer be sent: stop.
struct Gone;

/// Handle one stream until it ends, is reset, or a refusal ends it.
pub(crate) async fn exchange(
    shared: Arc<GatewayState>,
    mut inbound: Streaming<ProcessingRequest>,
    out: Out,
) {
    let mut x = Exchange {
        shared,
        arrival: Instant::now(),
        headers: None,
        metadata: None,
        body: Vec::new(),
        trailers: false,
        life: None,
        placed: false,
    };
    loop {
        let next = if x.placed {
            inbound.message().await
        } else {
            // Until its body ends, a request is the client's to finish within the client's time.
            let within = x.shared.config.client_timeout;
            match tokio::time::timeout(within, inbound.message()).await {
                Ok(next) => next,
                Err(_) => {
                    let why = format!(
                        "the request's body did not end within {} s",
                        within.as_secs_f64()
                    );
                    let refused = refusal(ApiError::body_timeout(within), &why);
                    let _ = out.send(Ok(refused)).await;
                    return;
                }
            }
        };
        let (request, metadata) = match next {
            Ok(Some(ProcessingRequest {
                request: Some(request),
                metadata_context,
                ..
            })) => (request, metadata_context),
            Ok(Some(_)) => continue, // nothing to process
            // Ended or reset: a request in flight is dropped with its life.
            Ok(None) | Err(_) => return,
        };
        if x.on(request, metadata, &mut inbound, &out).await.is_err() {
            return;
        }
    }
}

/// What one stream has seen so far.
struct Exchange {
    shared: Arc<GatewayState>,
    arrival: Instant,
    headers: Option<HttpHeaders>,
    /// The proxy's metadata sent with the request's headers (its subset hint).
    metadata: Option<Metadata>,
    body: Vec<u8>,
    /// The request's trailers came before it was placed: answered after its body.
    trailers: bool,
    life: Option<Life>,
    /// The endpoint was sent: from here the stream is the response's.
    placed: bool,
}

impl Exchange {
    async fn on(
        &mut self,
        request: Request,
        metadata: Option<Metadata>,
        inbound: &mut Streaming<ProcessingRequest>,
        out: &Out,
    ) -> Result<(), Gone> {
        match request {
            Request::RequestHeaders(h) => {
                self.arrival = Instant::now();
                let end = h.end_of_stream;
                self.headers = Some(h);
                self.metadata = metadata;
                if end {
                    return self.place(inbound, out).await;
                }
                Ok(())
            }
            Request::RequestBody(b) => self.request_body(b, inbound, out).await,
            Request::RequestTrailers(_) if !self.placed => {
                self.trailers = true;
                Ok(())
            }
            Request::RequestTrailers(_) => send(out, m::trailers(true)).await,
            Request::ResponseHeaders(h) => self.response_headers(&h, metadata, out).await,
            Request::ResponseBody(b) => self.response_body(&b, out).await,
            Request::ResponseTrailers(_) => send(out, m::trailers(false)).await,
        }
    }

    async fn request_body(
        &mut self,
        b: HttpBody,
        inbound: &mut Streaming<ProcessingRequest>,
        out: &Out,
    ) -> Result<(), Gone> {
        if self.placed {
            // Envoy sends no more body after its end; anything else passes through.
            return send_all(out, m::body_chunks(&b.body, b.end_of_stream, true)).await;
        }
        if self.body.len() + b.body.len() > MAX_BODY {
            let why = format!("the request's body is over {MAX_BODY} bytes");
            let e = ApiError::invalid("body", why.clone());
            let _ = send(out, refusal_with(413, e, &why)).await;
            return Err(Gone);
        }
        self.body.extend_from_slice(&b.body);
        if b.end_of_stream {
            return self.place(inbound, out).await;
        }
        Ok(())
    }

    /// Choose the request's endpoint (waiting for admission while the engines are full), then
    /// answer with it and pass the body back; a refusal ends the stream.
    async fn place(
        &mut self,
        inbound: &mut Streaming<ProcessingRequest>,
        out: &Out,
    ) -> Result<(), Gone> {
        let shared = self.shared.clone();
        let pool = shared.endpoints();
        let subset = m::subset(self.metadata.as_ref());
        let eligible: Vec<usize> = (0..pool.len())
            .filter(|&i| subset.as_ref().is_none_or(|s| m::in_subset(&pool[i], s)))
            .collect();
        let Some(&first) = eligible.first() else {
            let why = "no endpoint of the proxy's subset hint is in the pool";
            let _ = send(
                out,
                refusal_with(503, ApiError::unavailable(why, true), why),
            )
            .await;
            return Err(Gone);
        };
        let body = Bytes::from(std::mem::take(&mut self.body));
        let endpoint = (self.headers.as_ref()).and_then(|h| completion(&m::header(h, ":path")?));
        let only = if subset.is_some() {
            eligible.clone()
        } else {
            Vec::new()
        };
        let chosen = match endpoint {
            Some(endpoint) => match self.admit(endpoint, &body, &only, inbound).await? {
                Ok(Placed { upstream, life }) => {
                    self.life = Some(life);
                    upstream
                }
                Err(e) => {
                    let why = e.message.clone();
                    let _ = send(out, refusal(e, &why)).await;
                    return Err(Gone);
                }
            },
            // Not a completion (`GET /v1/models`, …): no decision to make, any endpoint serves.
            None => first,
        };
        let order = std::iter::once(chosen).chain(eligible.into_iter().filter(|&i| i != chosen));
        let endpoints: Vec<&str> = order.map(|i| pool[i].as_str()).collect();
        send(out, m::picked(&endpoints.join(","))).await?;
        self.placed = true;
        let has_body = self.headers.as_ref().is_some_and(|h| !h.end_of_stream);
        if has_body {
            send_all(out, m::body_chunks(&body, true, true)).await?;
        }
        if self.trailers {
            send(out, m::trailers(true)).await?;
        }
        Ok(())
    }

    /// Admission by the core, unless the stream is reset while it waits (then its place in the
    /// queue is given up with the waiting future).
    async fn admit(
        &mut self,
        endpoint: Endpoint,
        body: &Bytes,
        only: &[usize],
        inbound: &mut Streaming<ProcessingRequest>,
    ) -> Result<Result<Placed, ApiError>, Gone> {
        let headers = self.headers.as_ref().map(m::header_map).unwrap_or_default();
        let arrival = self.arrival;
        let placing = routes::place(&self.shared, endpoint, &headers, body, arrival, only);
        let mut placing = std::pin::pin!(placing);
        loop {
            tokio::select! {
                placed = &mut placing => return Ok(placed),
                next = inbound.message() => match next {
                    Ok(Some(msg)) if matches!(msg.request, Some(Request::RequestTrailers(_))) => {
                        self.trailers = true;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => return Err(Gone),
                },
            }
        }
    }

    async fn response_headers(
        &mut self,
        h: &HttpHeaders,
        metadata: Option<Metadata>,
        out: &Out,
    ) -> Result<(), Gone> {
        let status = m::header(h, ":status").and_then(|s| s.parse::<u16>().ok());
        let status = status.and_then(|s| hyper::StatusCode::from_u16(s).ok());
        if let (Some(life), Some(status)) = (&mut self.life, status) {
            life.answered_with(status);
        }
        if let Some(served) = m::served(metadata.as_ref()) {
            tracing::debug!("served by {served}");
        }
        send(out, m::headers_unchanged(false)).await?;
        if h.end_of_stream {
            self.end_answer();
        }
        Ok(())
    }

    async fn response_body(&mut self, b: &HttpBody, out: &Out) -> Result<(), Gone> {
        if let Some(life) = &mut self.life {
            life.passed(&b.body, Instant::now());
        }
        send_all(out, m::body_chunks(&b.body, b.end_of_stream, false)).await?;
        if b.end_of_stream {
            self.end_answer();
        }
        Ok(())
    }

    /// The answer ended whole: learned from, and the engine's slot freed.
    fn end_answer(&mut self) {
        if let Some(life) = self.life.take() {
            life.ended(Ended::Whole);
        }
    }
}

/// The completion a request path names (its query left aside), if it is one.
fn completion(path: &str) -> Option<Endpoint> {
    match path.split('?').next()? {
        "/v1/chat/completions" => Some(Endpoint::Chat),
        "/v1/completions" => Some(Endpoint::Completions),
        _ => None,
    }
}

/// `e` as the protocol answers it: 429 when the request is dropped (a full queue, a shed
/// sheddable request, a tenant over its limit), 503 when no endpoint can take it, the error's
/// own status otherwise (400 for a body that is not a request).
fn refusal(e: ApiError, why: &str) -> ProcessingResponse {
    let status = match e.refused {
        Some(RequestRefused::Full(_) | RequestRefused::Shed(_) | RequestRefused::TenantLimit) => {
            429
        }
        Some(RequestRefused::Silent | RequestRefused::Closed) => 503,
        None => e.status.as_u16(),
    };
    refusal_with(status, e, why)
}

fn refusal_with(status: u16, e: ApiError, why: &str) -> ProcessingResponse {
    let body = serde_json::json!({
        "error": {"message": e.message, "type": e.kind, "param": e.param}
    });
    let shed = e.refused.and_then(RequestRefused::reason).map(|r| r.name());
    m::immediate(status, why, shed, body.to_string().into_bytes())
}

async fn send(out: &Out, r: ProcessingResponse) -> Result<(), Gone> {
    out.send(Ok(r)).await.map_err(|_| Gone)
}

async fn send_all(out: &Out, rs: Vec<ProcessingResponse>) -> Result<(), Gone> {
    for r in rs {
        send(out, r).await?;
    }
    Ok(())
}
