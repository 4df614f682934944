//! Client connections under a cap that accept can never run past: the cap sits below the
//! process's descriptor limit (raised from soft to hard at start), and at the cap the oldest
//! idle connection is closed to make room before the next is accepted. So a flood of idle
//! connections (keep-alive clients that went quiet, a slowloris) costs its oldest members their
//! connections, never a new client its answer; a busy connection is closed only when no idle one
//! is left, and then gracefully (its request finishes first).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Client connections at most, whatever the descriptor limit allows.
pub const MAX_CONNECTIONS: usize = 4096;
/// Descriptors kept for everything but client connections: the listener, the runtime, the
/// model files, logs (the upstream connections are added to it).
const RESERVED: u64 = 64;
/// How long a full accept waits for an evicted connection to close before it evicts another.
const EVICTION_WAIT: Duration = Duration::from_millis(100);

/// Raise the descriptor limit's soft value to its hard one and return the connection cap it
/// allows beside `upstream_connections` (at most `wanted`, at least 1).
pub fn cap(wanted: usize, upstream_connections: usize) -> usize {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        tracing::debug!("descriptor limit raised from {soft} to {hard}");
        hard
    } else {
        soft
    };
    if limit == RLIM_INFINITY {
        return wanted;
    }
    let reserved = RESERVED + upstream_connections as u64;
    let allowed = usize::try_from(limit.saturating_sub(reserved)).unwrap_or(usize::MAX);
    if allowed < wanted {
        tracing::info!(
            "client connections capped at {allowed} by the descriptor limit ({limit}); raise it \
             (ulimit -n) for more"
        );
    }
    wanted.min(allowed).max(1)
}

/// One live connection, as the cap sees it.
struct Live {
    /// Requests it is serving now.
    busy: AtomicUsize,
    /// When it was accepted or last finished a request (µs since the registry began).
    last_active_us: AtomicU64,
    /// Asked to close.
    closing: AtomicBool,
    close: Notify,
}

/// The live connections and the permits that bound them.
pub struct Connections {
    permits: Arc<Semaphore>,
    live: Mutex<HashMap<u64, Arc<Live>>>,
    next: AtomicU64,
    start: Instant,
    evicted: AtomicU64,
}

impl Connections {
    /// At most `cap` connections at once.
    pub fn new(cap: usize) -> Arc<Connections> {
        Arc::new(Connections {
            permits: Arc::new(Semaphore::new(cap)),
            live: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            start: Instant::now(),
            evicted: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Live>>> {
        // Inserts and removes leave the map whole.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Connections closed to make room so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Room for one more connection (closing the oldest idle one if there is none), to take
    /// before accepting it.
    pub async fn room(self: &Arc<Self>) -> Room {
        let permit = loop {
            // (The registry owns its semaphore and never closes it.)
            match self.permits.clone().try_acquire_owned() {
                Ok(p) => break p,
                Err(_) => self.evict_one(),
            }
            if let Ok(Ok(p)) =
                tokio::time::timeout(EVICTION_WAIT, self.permits.clone().acquire_owned()).await
            {
                break p;
            }
        };
        Room {
            connections: self.clone(),
            _permit: permit,
        }
    }

    /// Ask the oldest idle connection to close (the oldest busy one if none is idle).
    fn evict_one(&self) {
        let live = self.lock();
        let oldest = live
            .values()
            .filter(|l| !l.closing.load(Ordering::Relaxed))
            .min_by_key(|l| {
                (
                    l.busy.load(Ordering::Relaxed) > 0,
                    l.last_active_us.load(Ordering::Relaxed),
                )
            });
        if let Some(l) = oldest {
            l.closing.store(true, Ordering::Relaxed);
            l.close.notify_one();
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Room taken for a connection about to be accepted.
pub struct Room {
    connections: Arc<Connections>,
    _permit: OwnedSemaphorePermit,
}

impl Room {
    /// The accepted connection moves in.
    pub fn occupy(self) -> ConnectionSeat {
        let id = self.connections.next.fetch_add(1, Ordering::Relaxed);
        let live = Arc::new(Live {
            busy: AtomicUsize::new(0),
            last_active_us: AtomicU64::new(self.connections.now_us()),
            closing: AtomicBool::new(false),
            close: Notify::new(),
        });
        self.connections.lock().insert(id, live.clone());
        ConnectionSeat {
            room: self,
            id,
            live,
        }
    }
}

/// A live connection's place in the registry; dropped when the connection ends.
pub struct ConnectionSeat {
    room: Room,
    id: u64,
    live: Arc<Live>,
}

impl ConnectionSeat {
    /// Wait until the cap asks this connection to close.
    pub async fn evicted(&self) {
        self.live.close.notified().await;
    }

    /// Whether it serves a request now.
    pub fn busy(&self) -> bool {
        self.live.busy.load(Ordering::Relaxed) > 0
    }

    /// A request on it began; it is busy until the returned mark (which its answer's body
    /// carries) is dropped.
    pub fn request(&self) -> Busy {
        self.live.busy.fetch_add(1, Ordering::Relaxed);
        Busy {
            live: self.live.clone(),
            connections: self.room.connections.clone(),
        }
    }
}

impl Drop for ConnectionSeat {
    fn drop(&mut self) {
        // Its permit goes back with `room`.
        self.room.connections.lock().remove(&self.id);
    }
}

/// A request in progress on a connection.
pub struct Busy {
    live: Arc<Live>,
    connections: Arc<Connections>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.live
            .last_active_us
            .store(self.connections.now_us(), Ordering::Relaxed);
        self.live.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An answer's body that keeps its connection marked busy until it is sent or dropped.
pub struct BusyBody<B> {
    body: B,
    _busy: Busy,
}

impl<B> BusyBody<B> {
    /// `body`, marked by `busy`.
    pub fn new(body: B, busy: Busy) -> BusyBody<B> {
        BusyBody { body, _busy: busy }
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for BusyBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let c = Connections::new(2);
            let first = c.room().await.occupy();
            tokio::time::sleep(Duration::from_millis(2)).await;
            let second = c.room().await.occupy();
            // The first is busy: the second, though newer, is the one asked to leave.
            let busy = first.request();
            let third = tokio::spawn({
                let c = c.clone();
                async move { c.room().await }
            });
            tokio::time::timeout(Duration::from_secs(5), second.evicted())
                .await
                .expect("the idle one is asked to close");
            assert!(first.busy());
            drop(second);
            let third = third.await.expect("room").occupy();
            assert_eq!(c.evicted(), 1);
            // The first is idle again and the third busy: the first is asked.
            drop(busy);
            let _busy = third.request();
            let fourth = tokio::spawn({
                let c = c.clone();
                async move { c.room().await }
            });
            tokio::time::timeout(Duration::from_secs(5), first.evicted())
                .await
                .expect("the oldest idle one is asked");
            drop(first);
            drop(fourth.await.expect("room"));
            assert_eq!(c.evicted(), 2);
        });
    }
}
