//! `xsched llm epp`: the gateway's decisions behind Envoy, as a Gateway API Inference Extension
//! endpoint picker (EPP). Users who serve at scale already run an Envoy-based proxy (kgateway,
//! Istio, Envoy Gateway, GKE) in front of an InferencePool; the proxy asks an endpoint picker
//! over Envoy's `ext_proc` gRPC which pod serves each request, and proxies the bytes itself.
//! Here the picker is the gateway without its HTTP side: the same configuration, the same core
//! under the same lock (`request_queue.rs`), the same engines' scrapers, the same path from a body
//! to a decision (`routes::place`). So a request waits in the picker while every endpoint is
//! full and leaves in the policy's order (SageSched's, or FCFS, classes, deadlines), although
//! Envoy carries it.
//!
//! Parts: [`messages`] (building and reading the protocol's messages), `exchange` (one
//! request's stream), and this file (the gRPC server: the `ExternalProcessor` service and the
//! gRPC health services `liveness`, `readiness` and the ext_proc service's own name).

mod exchange;
pub mod messages;

use crate::config::GatewayConfig;
use crate::server::{GatewayError, ServingThread};
use crate::shared::GatewayState;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

/// Answers a stream may have queued before it waits for Envoy to read them.
const ANSWERS_QUEUED: usize = 16;

/// The `ExternalProcessor` service over what every request shares.
struct Picker {
    shared: Arc<GatewayState>,
}

#[tonic::async_trait]
impl ExternalProcessor for Picker {
    type ProcessStream = ReceiverStream<Result<ProcessingResponse, Status>>;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let (out, answers) = tokio::sync::mpsc::channel(ANSWERS_QUEUED);
        tokio::spawn(exchange::exchange(
            self.shared.clone(),
            request.into_inner(),
            out,
        ));
        Ok(Response::new(ReceiverStream::new(answers)))
    }
}

/// An endpoint picker bound to its address, not yet serving.
pub struct Epp {
    shared: Arc<GatewayState>,
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    metrics: Option<tokio::net::TcpListener>,
}

/// An endpoint picker serving on its own thread; dropping it stops it.
pub struct RunningEpp {
    addr: SocketAddr,
    shared: Arc<GatewayState>,
    serving: ServingThread,
}

impl Epp {
    /// Check `config` whole (its `upstreams` are the pool's endpoints, `http://host:port`,
    /// scraped for their metrics), then bind its address for gRPC.
    pub fn bind(config: GatewayConfig) -> Result<Epp, GatewayError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("xsched-epp")
            .enable_all()
            .build()?;
        let (shared, listener) = crate::server::bound(config, &runtime)?;
        Ok(Epp {
            shared,
            runtime,
            listener,
            metrics: None,
        })
    }

    /// Also serve the gateway's Prometheus page (`GET` any path) over HTTP at `addr`; the
    /// address bound.
    pub fn with_metrics(&mut self, addr: SocketAddr) -> Result<SocketAddr, GatewayError> {
        let listener = self.runtime.block_on(tokio::net::TcpListener::bind(addr))?;
        let bound = listener.local_addr()?;
        self.metrics = Some(listener);
        Ok(bound)
    }

    /// Serve on a thread of its own until the returned handle is dropped.
    pub fn spawn(self) -> Result<RunningEpp, GatewayError> {
        let addr = self.listener.local_addr()?;
        let kept = self.shared.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (shared, listener, runtime) = (self.shared, self.listener, self.runtime);
        if let Some(metrics) = self.metrics {
            runtime.spawn(metrics_page(metrics, shared.clone()));
        }
        let thread = std::thread::Builder::new()
            .name("xsched-epp-serve".into())
            .spawn(move || {
                runtime.block_on(serve(shared, listener, stopped));
                runtime.shutdown_background();
            })?;
        Ok(RunningEpp {
            addr,
            shared: kept,
            serving: ServingThread {
                stop: Some(stop),
                thread: Some(thread),
            },
        })
    }
}

/// The picker's gRPC server, with health, until `stopped`.
async fn serve(
    shared: Arc<GatewayState>,
    listener: tokio::net::TcpListener,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in ["liveness", "readiness"] {
        health
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    health
        .set_serving::<ExternalProcessorServer<Picker>>()
        .await;
    let served = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(ExternalProcessorServer::new(Picker { shared }))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            let _ = stopped.await;
        })
        .await;
    if let Err(e) = served {
        tracing::error!("the endpoint picker stopped: {e}");
    }
}

/// Answer every HTTP request at `listener` with the metrics page.
async fn metrics_page(listener: tokio::net::TcpListener, shared: Arc<GatewayState>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_req| {
                let page = crate::routes::metrics_text(&shared);
                async move {
                    let mut r =
                        hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(page)));
                    r.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
                    );
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

impl RunningEpp {
    /// The address it serves gRPC on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests that asked for an endpoint so far (admitted, waiting, refused or gone).
    pub fn arrivals(&self) -> u64 {
        self.shared.admission.arrivals()
    }

    /// How many requests wait, and how many are in flight on each endpoint.
    pub fn load(&self) -> (usize, Vec<usize>) {
        let endpoints = self.shared.config.upstreams.len();
        self.shared.admission.load(endpoints)
    }

    /// The gateway's Prometheus page for the picker's requests (queue wait, TTFT, TTLT, the
    /// predictor's learning, the engines' scraped state).
    pub fn metrics(&self) -> String {
        crate::routes::metrics_text(&self.shared)
    }

    /// Serve until the process is killed.
    pub fn wait(mut self) {
        self.serving.join();
    }
}
