//! The listening socket, the accept loop, and the daemon's lifetime.

use crate::connection;
use crate::core::Core;
use crate::registry::Registry;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use thiserror::Error;
use xsched_core::{CoreError, Dispatcher, policy};

/// Why the daemon could not start.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// Another daemon answers on the socket.
    #[error("a daemon is already listening on {0}")]
    AlreadyRunning(PathBuf),
    /// The socket could not be created.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The policy name is unknown.
    #[error(transparent)]
    Policy(#[from] CoreError),
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Spawn(std::io::Error),
}

/// State shared by the accept loop and every connection.
pub(crate) struct Shared {
    pub(crate) core: Core,
    pub(crate) registry: Registry,
    pub(crate) stopping: AtomicBool,
    /// Operations issued, for the metrics.
    pub(crate) ops: Arc<OpCounters>,
}

/// How many operations the daemon issued.
#[derive(Default)]
pub(crate) struct OpCounters {
    pub(crate) suspends: AtomicU64,
    pub(crate) resumes: AtomicU64,
}

/// A bound daemon, not yet serving.
pub struct Daemon {
    listener: UnixListener,
    path: PathBuf,
    shared: Arc<Shared>,
}

impl Daemon {
    /// Listen on `path` with `policy`. A stale socket file (nobody answering) is replaced; a
    /// live one is an error.
    pub fn bind(path: &Path, policy_name: &str) -> Result<Daemon, DaemonError> {
        let policy = policy::by_name(policy_name)?;
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(DaemonError::AlreadyRunning(path.to_path_buf()));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path).map_err(|source| DaemonError::Bind {
            path: path.to_path_buf(),
            source,
        })?;
        let ops: Arc<OpCounters> = Arc::default();
        let shared = Arc::new(Shared {
            core: Core::new(Dispatcher::new(policy), ops.clone()),
            registry: Registry::default(),
            stopping: AtomicBool::new(false),
            ops,
        });
        let timers = shared.clone();
        std::thread::Builder::new()
            .name("xsched-timers".into())
            .spawn(move || timers.core.run_timers())
            .map_err(DaemonError::Spawn)?;
        Ok(Daemon {
            listener,
            path: path.to_path_buf(),
            shared,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Also serve Prometheus metrics at `http://ADDR/metrics`; returns the bound address (use
    /// port 0 to pick a free one).
    pub fn serve_metrics(
        &self,
        addr: impl std::net::ToSocketAddrs,
    ) -> Result<std::net::SocketAddr, DaemonError> {
        crate::metrics::start(addr, self.shared.clone()).map_err(DaemonError::Spawn)
    }

    /// Serve until [`RunningDaemon::stop`] (or forever, when called directly).
    pub fn serve(self) {
        let next_conn = AtomicU64::new(0);
        for stream in self.listener.incoming() {
            if self.shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            match stream {
                Ok(stream) => {
                    let conn = next_conn.fetch_add(1, Ordering::Relaxed);
                    let shared = self.shared.clone();
                    let spawned = std::thread::Builder::new()
                        .name(format!("xsched-conn-{conn}"))
                        .spawn(move || connection::serve(&shared, conn, stream));
                    if let Err(e) = spawned {
                        tracing::error!("cannot serve a connection: {e}");
                    }
                }
                Err(e) => tracing::warn!("accept: {e}"),
            }
        }
        self.shared.core.stop();
        let _ = std::fs::remove_file(&self.path);
    }

    /// Serve on a background thread; the handle stops the daemon when dropped.
    pub fn spawn(self) -> Result<RunningDaemon, DaemonError> {
        let path = self.path.clone();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("xsched-daemon".into())
            .spawn(move || self.serve())
            .map_err(DaemonError::Spawn)?;
        Ok(RunningDaemon {
            path,
            shared,
            thread: Some(thread),
        })
    }
}

/// A daemon serving on a background thread.
pub struct RunningDaemon {
    path: PathBuf,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl RunningDaemon {
    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stop accepting and remove the socket file. Connected clients keep their connection until
    /// they close it; their queues then leave the scheduler.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        self.shut_down();
    }
}
