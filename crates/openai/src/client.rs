//! The HTTP/1.1 client servers are reached with: pooled, with a connect timeout, and an idle
//! connection kept for less than llama.cpp's server keeps it (so a connection the server is
//! closing is never reused).

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use std::time::Duration;

/// The client type.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// How long connecting to a server may take (the gateway answers a 502 after).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an idle pooled connection is kept (under llama.cpp's server's 5 s keep-alive, so
/// no connection the server is closing is reused).
pub const POOL_IDLE: Duration = Duration::from_secs(4);

/// A client (HTTP/1.1) that keeps up to `pooled` idle connections per server. Must be called in
/// a tokio runtime.
pub fn client(pooled: usize) -> HttpClient {
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
