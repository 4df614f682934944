//! The upstream part: the engines, the clients that reach them and how long they may take;
//! sending one request there like the client's, with one retry on a new connection; and each
//! engine's health as its answers show it. It knows nothing of scheduling: whoever sends says
//! which upstream, and gets its answer's head and body (or why there is none).
//!
//! No upstream can hang a client: the answer's head must come within the first-byte timeout (a
//! 504 after). A request that fails before any answer byte on a pooled connection is sent once
//! more on a new one: engines may close a kept-alive connection just as it is handed to the next
//! request (llama.cpp's server does, right after a stream's last chunk).

use crate::error::ApiError;
use crate::health::Health;
use bytes::Bytes;
use http_body_util::Full;
pub use hyper::Uri;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Response};
use std::sync::Arc;
use std::time::Duration;

pub use xsched_openai::client::{CONNECT_TIMEOUT, POOL_IDLE, client};
/// The HTTP client the gateway talks to upstreams with.
pub type UpstreamClient = xsched_openai::client::HttpClient;

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

    /// The name of upstream `u` (its URL without a trailing `/`).
    pub fn name(&self, u: usize) -> String {
        self.uris
            .get(u)
            .map(|b| b.to_string().trim_end_matches('/').to_string())
            .unwrap_or_default()
    }

    /// How long an answer's body may fall silent.
    pub fn idle(&self) -> Duration {
        self.timeouts.idle
    }

    /// Send `body` to upstream `u` like the client's request `parts` (its path, query and the
    /// headers that matter: content type, authorization, accept): its answer (head; the body
    /// follows), a 503 with `Retry-After` when nothing listens there, a 502 saying why it failed
    /// otherwise, or a 504 when it sent no answer in time. A failure is reported to the upstream's health.
    pub async fn send(
        &self,
        u: usize,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Result<Response<Incoming>, ApiError> {
        let base = self
            .uris
            .get(u)
            .ok_or_else(|| ApiError::bad_gateway("no such upstream"))?;
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", hyper::http::uri::PathAndQuery::as_str);
        let uri = format!("{}{path}", base.to_string().trim_end_matches('/'))
            .parse::<Uri>()
            .map_err(|e| ApiError::bad_gateway(format!("upstream {base}: {e}")))?;
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
        let deadline = tokio::time::Instant::now() + self.timeouts.first_byte;
        let send = |client: &UpstreamClient| {
            let sent = request().map(|r| client.request(r));
            async move {
                match sent {
                    Ok(sending) => Some(tokio::time::timeout_at(deadline, sending).await),
                    Err(_) => None,
                }
            }
        };
        let mut sent = send(&self.pooled).await;
        if let Some(Ok(Err(e))) = &sent
            && !e.is_connect()
        {
            // Failed before any answer byte, on a connection that may have been pooled: once
            // more on a new one.
            tracing::debug!("upstream {base}: {e}; retrying on a new connection");
            sent = send(&self.fresh).await;
        }
        self.answered(u, sent)
    }

    /// What came of sending to upstream `u`, reported to its health.
    fn answered(
        &self,
        u: usize,
        sent: Option<
            Result<
                Result<Response<Incoming>, hyper_util::client::legacy::Error>,
                tokio::time::error::Elapsed,
            >,
        >,
    ) -> Result<Response<Incoming>, ApiError> {
        let base = self.name(u);
        match sent {
            Some(Ok(Ok(answer))) => {
                self.health.answered(u);
                Ok(answer)
            }
            // Headers copied from a request hyper parsed are valid.
            None => Err(ApiError::bad_gateway(format!(
                "upstream {base}: the request could not be built"
            ))),
            // Nothing listens there (down, restarting, or not started yet): the client may
            // retry, and the engine is ejected and probed back.
            Some(Ok(Err(e))) if e.is_connect() => {
                let why = format!("upstream {base} refuses connections (down or starting): {e}");
                tracing::warn!("{why}");
                self.health.failed(u, &why);
                Err(ApiError::unavailable(why, true))
            }
            Some(Ok(Err(e))) => {
                let why = format!("upstream {base} failed: {e}");
                tracing::warn!("{why}");
                self.health.failed(u, &why);
                Err(ApiError::bad_gateway(why))
            }
            Some(Err(_)) => {
                let why = format!(
                    "upstream {base} sent no answer within {} s",
                    self.timeouts.first_byte.as_secs_f64()
                );
                tracing::warn!("{why}");
                self.health.failed(u, &why);
                Err(ApiError::gateway_timeout(why))
            }
        }
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
pub fn strip_hop_by_hop(headers: &mut hyper::HeaderMap) {
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
