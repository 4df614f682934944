//! The listening socket, the accept loop, and the daemon's lifetime.
//!
//! The socket is created where nobody else can swap it: its directory is created with mode 0700
//! when missing, and refused when another user owns it or anyone else may write to it (unless
//! it is sticky, like `/tmp`); a socket file of another user is never replaced. The socket is
//! bound under a temporary name, given its mode and group, then renamed into place, so it is
//! never reachable with looser permissions.

use crate::accept::AcceptBackoff;
use crate::config::DaemonConfig;
use crate::connection;
use crate::error::DaemonError;
use crate::peer::Peer;
use crate::shared::DaemonState;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xsched_core::PolicySpec;
use xsched_core::error::chain_text;
use xsched_sys::prompt::{CpuGuard, RtControl};

/// A bound daemon, not yet serving.
pub struct Daemon {
    listener: UnixListener,
    path: PathBuf,
    shared: Arc<DaemonState>,
}

/// Check (or create) the socket's directory, and clear a stale socket of our own.
fn prepare(path: &Path) -> Result<(), DaemonError> {
    let unsafe_because = |why: String| DaemonError::Unsafe {
        path: path.to_path_buf(),
        why,
    };
    let me = nix::unistd::getuid().as_raw();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|source| DaemonError::Bind {
                path: path.to_path_buf(),
                source,
            })?;
    }
    let d = std::fs::metadata(dir).map_err(|source| DaemonError::Bind {
        path: path.to_path_buf(),
        source,
    })?;
    let sticky = d.mode() & 0o1000 != 0;
    if d.uid() != me && d.uid() != 0 {
        return Err(unsafe_because(format!(
            "its directory {} belongs to uid {}, not to this user ({me}); remove it or choose \
             another path (XSCHED_SOCKET)",
            dir.display(),
            d.uid()
        )));
    }
    if d.mode() & 0o022 != 0 && !sticky {
        return Err(unsafe_because(format!(
            "others may write to its directory {} (mode {:o}); make it 0700 or choose another path",
            dir.display(),
            d.mode() & 0o777
        )));
    }
    if let Ok(existing) = std::fs::symlink_metadata(path) {
        if UnixStream::connect(path).is_ok() {
            return Err(DaemonError::AlreadyRunning(path.to_path_buf()));
        }
        if existing.uid() != me && me != 0 {
            return Err(unsafe_because(format!(
                "the file there belongs to uid {}; only its owner may replace it",
                existing.uid()
            )));
        }
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Bind under a temporary name, set mode and group, rename into place.
fn listen(path: &Path, config: &DaemonConfig) -> Result<UnixListener, DaemonError> {
    let bind_err = |source| DaemonError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let gid = config.socket_gid()?;
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.new", std::process::id()));
    let temp = PathBuf::from(temp);
    let _ = std::fs::remove_file(&temp);
    let listener = UnixListener::bind(&temp).map_err(bind_err)?;
    let placed =
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(config.socket.mode))
            .and_then(|()| match gid {
                Some(g) => std::os::unix::fs::chown(&temp, None, Some(g)),
                None => Ok(()),
            })
            .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&temp);
        return Err(bind_err(e));
    }
    Ok(listener)
}

/// Let the daemon hold as many descriptors as the hard limit allows (each connection needs one).
fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok()
    {
        tracing::debug!("descriptor limit raised from {soft} to {hard}");
    }
}

/// Logs refused connections without letting a flood of them flood the log: the first at once,
/// then at most one line a second with the count since.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    since: u64,
}

impl RefusalLog {
    fn refused(&mut self, peer: &Peer, why: &str) {
        self.since += 1;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                "refused a connection of pid {} uid {}: {why} ({} refused since the last such line)",
                peer.pid,
                peer.uid,
                self.since
            );
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}

impl Daemon {
    /// Listen on `path` with `policy` and the default configuration. A stale socket file
    /// (nobody answering) of this user is replaced; a live one is an error.
    pub fn bind(path: &Path, policy: &PolicySpec) -> Result<Daemon, DaemonError> {
        Daemon::bind_with(path, policy, &DaemonConfig::default())
    }

    /// Listen on `path` with `policy` and `config`. A bad `XSCHED_RT_CONTROL` is an error here.
    pub fn bind_with(
        path: &Path,
        policy: &PolicySpec,
        config: &DaemonConfig,
    ) -> Result<Daemon, DaemonError> {
        RtControl::from_env()?;
        let shared = Arc::new(DaemonState::new(policy.build(), config)?);
        prepare(path)?;
        raise_descriptor_limit();
        let listener = listen(path, config)?;
        let timers = shared.clone();
        std::thread::Builder::new()
            .name("xsched-timers".into())
            .spawn(move || {
                let mut guard = CpuGuard::start();
                timers.core.run_timers(|| {
                    guard.check();
                    guard.look_within()
                });
            })
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
    /// port 0 to pick a free one). Anyone who can reach the address sees every queue.
    pub fn serve_metrics(
        &self,
        addr: impl std::net::ToSocketAddrs,
    ) -> Result<std::net::SocketAddr, DaemonError> {
        crate::metrics::start(addr, self.shared.clone()).map_err(DaemonError::Spawn)
    }

    /// Serve until [`RunningDaemon::stop`] (or forever, when called directly).
    pub fn serve(self) {
        let mut next_conn = 0u64;
        let mut backoff = AcceptBackoff::default();
        let mut refusals = RefusalLog::default();
        loop {
            let accepted = self.listener.accept();
            if self.shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            let stream = match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    backoff.failed("daemon socket", &e);
                    continue;
                }
            };
            backoff.succeeded("daemon socket");
            next_conn += 1;
            let conn = next_conn;
            let peer = match Peer::of(&stream) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("connection {conn}: {}", chain_text(&e));
                    continue;
                }
            };
            let admitted = match self.shared.admission.admit(conn, peer.uid, &stream) {
                Ok(a) => a,
                Err(why) => {
                    let why = why.to_string();
                    refusals.refused(&peer, &why);
                    connection::refuse_at_once(&stream, why);
                    continue;
                }
            };
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("xsched-conn-{conn}"))
                .stack_size(256 * 1024)
                .spawn(move || connection::serve(&shared, conn, stream, peer, admitted));
            if let Err(e) = spawned {
                tracing::error!("cannot serve a connection: {e}");
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
    shared: Arc<DaemonState>,
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
