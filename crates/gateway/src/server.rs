//! The gateway's server: it binds its address once its configuration is checked whole
//! (`config.rs`), accepts client connections under a cap (`conns.rs`) and hands each request to
//! its route (`routes.rs`). It runs on its own tokio runtime ([`Gateway::spawn`]) so a caller
//! without one (the CLI, a test) can start and stop it.
//!
//! That runtime has one thread. A streamed event costs the gateway a few µs, so one thread
//! passes on far more events a second than an engine sends; a second worker thread made every
//! event dearer instead: waking a task then wakes the other worker too, and the answer's body
//! could not gather what the engine's connection had already read (`relay.rs`). CPU work that
//! could hold the thread (embedding a prompt, scanning the history, learning) runs on the
//! blocking pool.

pub use crate::config::{
    GatewayConfig, GatewayError, MAX_BODY, MAX_CONNECTIONS, MAX_DRAIN, MAX_HEAD,
};
use crate::conns::{self, BusyBody};
use crate::error::AnswerBody;
use crate::request_queue::RequestQueue;
use crate::shared::GatewayState;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

/// A gateway bound to its address, not yet serving.
pub struct Gateway {
    shared: Arc<GatewayState>,
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
}

/// A gateway serving on its own thread; dropping it stops it.
pub struct RunningGateway {
    addr: SocketAddr,
    admission: Arc<RequestQueue>,
    upstreams: usize,
    serving: ServingThread,
}

/// A server's own thread and what stops it: dropped, it stops the thread and joins it.
pub(crate) struct ServingThread {
    /// Ends the serving thread's loop.
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

impl ServingThread {
    /// Wait for the thread to end by itself (it serves until the process ends).
    pub fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServingThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join();
    }
}

/// `config` checked whole, the core's queue made, its address bound and what requests share
/// built, in `runtime` (where the engines' scrapers start): the gateway's and the endpoint
/// picker's start alike.
pub(crate) fn bound(
    config: GatewayConfig,
    runtime: &tokio::runtime::Runtime,
) -> Result<(Arc<GatewayState>, tokio::net::TcpListener), GatewayError> {
    let core = config.check()?;
    let admission = RequestQueue::new(core)?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(config.listen))?;
    let _enter = runtime.enter();
    Ok((Arc::new(GatewayState::new(config, admission)), listener))
}

impl Gateway {
    /// Check `config` whole, then bind its address.
    pub fn bind(config: GatewayConfig) -> Result<Gateway, GatewayError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("xsched-gateway-blocking")
            .enable_all()
            .build()?;
        let (shared, listener) = bound(config, &runtime)?;
        Ok(Gateway {
            shared,
            runtime,
            listener,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, GatewayError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serve on a thread of its own until the returned handle is dropped.
    pub fn spawn(self) -> Result<RunningGateway, GatewayError> {
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
            serving: ServingThread {
                stop: Some(stop),
                thread: Some(thread),
            },
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
        self.serving.join();
    }
}

async fn accept(listener: tokio::net::TcpListener, shared: Arc<GatewayState>) {
    loop {
        let room = shared.connections.room().await;
        let stream = match listener.accept().await {
            Ok((s, _)) => {
                // A stream is many small writes (one event a token): without this, Nagle's
                // algorithm holds each behind the client's delayed ACK, tens of milliseconds a
                // write.
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
        let within = shared.config.client_timeout;
        let occupant = Arc::new(room.occupy());
        tokio::spawn(async move {
            let on = occupant.clone();
            let service = service_fn(move |req| {
                let busy = on.request();
                handle(req, shared.clone(), busy)
            });
            let connection = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(within)
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
    shared: Arc<GatewayState>,
    busy: conns::Busy,
) -> Result<Response<BusyBody<AnswerBody>>, std::convert::Infallible> {
    let answer = crate::routes::route(req, &shared).await;
    shared.metrics.answered(answer.status().as_u16());
    Ok(answer.map(|body| BusyBody::new(body, busy)))
}
