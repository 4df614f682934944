//! Prometheus metrics (`xsched serve --metrics-addr 127.0.0.1:PORT`): queue states, operations
//! issued, queue statistics, and the accounting clients report (per queue, and per tenant:
//! uid), in the text exposition format at `/metrics`.
//!
//! The endpoint answers plain HTTP/1.0-style GETs, one request per connection, which is all a
//! Prometheus scraper needs; anything else gets a 404 or 400. Each request has its own thread
//! (at most [`MAX_CONCURRENT`]; beyond that a 503 at once), a request line longer than
//! [`MAX_REQUEST_LINE`] is a 400, and reads and writes time out: a scraper that connects and
//! says nothing delays no other scraper. It never blocks the scheduler: it takes a snapshot and
//! formats it outside the scheduler's lock.

use crate::accept::AcceptBackoff;
use crate::shared::DaemonState;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use xsched_proto::WireAccount;

/// Requests answered at once.
pub(crate) const MAX_CONCURRENT: usize = 8;
/// The longest request line read (bytes).
pub(crate) const MAX_REQUEST_LINE: u64 = 8 * 1024;
/// How long a scraper may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Serve `/metrics` on `addr` from a background thread. Returns the bound address.
pub(crate) fn start(
    addr: impl ToSocketAddrs,
    shared: Arc<DaemonState>,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("xsched-metrics".into())
        .spawn(move || serve(&listener, &shared))?;
    Ok(local)
}

/// Decrements the count of requests in progress when the request's thread ends, however.
struct InProgress(Arc<AtomicUsize>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve(listener: &TcpListener, shared: &Arc<DaemonState>) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut backoff = AcceptBackoff::default();
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                backoff.failed("metrics endpoint", &e);
                continue;
            }
        };
        backoff.succeeded("metrics endpoint");
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONCURRENT {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = respond(
                stream,
                "503 Service Unavailable",
                "too many scrapes at once\n",
            );
            continue;
        }
        let guard = InProgress(active.clone());
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("xsched-scrape".into())
            .spawn(move || {
                let _guard = guard;
                let _ = answer(stream, &shared);
            });
        if let Err(e) = spawned {
            tracing::warn!("metrics endpoint: cannot start a thread: {e}");
        }
    }
}

fn answer(stream: TcpStream, shared: &DaemonState) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut request_line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST_LINE)).read_line(&mut request_line)?;
    if !request_line.ends_with('\n') {
        return respond(
            stream,
            "400 Bad Request",
            "request line too long or cut off\n",
        );
    }
    let mut parts = request_line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => respond(stream, "200 OK", &render(shared)),
        (Some("GET"), Some(_)) => respond(stream, "404 Not Found", "only /metrics is served\n"),
        _ => respond(stream, "400 Bad Request", "expected GET /metrics\n"),
    }
}

fn respond(mut stream: TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The metrics text.
pub(crate) fn render(shared: &DaemonState) -> String {
    let (queues, policy) = shared.core.snapshot();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP xsched_info The running policy.\n# TYPE xsched_info gauge"
    );
    let _ = writeln!(out, "xsched_info{{policy=\"{policy}\"}} 1");
    let _ = writeln!(
        out,
        "# HELP xsched_operations_total Suspend and resume operations issued.\n# TYPE xsched_operations_total counter"
    );
    for (op, n) in [
        ("suspend", shared.ops.suspends.load(Ordering::Relaxed)),
        ("resume", shared.ops.resumes.load(Ordering::Relaxed)),
    ] {
        let _ = writeln!(out, "xsched_operations_total{{op=\"{op}\"}} {n}");
    }
    let gauges = [
        ("xsched_queue_ready", "1 if the queue has work"),
        (
            "xsched_queue_suspended",
            "1 if the scheduler holds the queue",
        ),
        (
            "xsched_queue_in_flight",
            "commands launched, not yet complete",
        ),
        (
            "xsched_queue_completed",
            "commands completed (client-reported)",
        ),
        (
            "xsched_queue_recent_p99_seconds",
            "P99 submit-to-completion latency over the last second",
        ),
    ];
    for (name, help) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} gauge");
        for q in &queues {
            let Some((peer, local, stats)) = shared.registry.owner(q.view.id) else {
                continue;
            };
            let value = match name {
                "xsched_queue_ready" => f64::from(u8::from(q.view.ready)),
                "xsched_queue_suspended" => f64::from(u8::from(q.suspended)),
                "xsched_queue_in_flight" => stats.in_flight as f64,
                "xsched_queue_completed" => stats.completed as f64,
                _ => stats.recent_p99_us / 1e6,
            };
            let process = peer.name.replace(['"', '\\', '\n'], "_");
            let _ = writeln!(
                out,
                "{name}{{pid=\"{}\",process=\"{process}\",device=\"{}\",queue=\"{local}\",priority=\"{}\"}} {value}",
                peer.pid, q.view.device.0, q.view.hints.priority
            );
        }
    }
    accounting(&mut out, shared, &queues);
    out
}

/// The accounting counters, per queue and summed per tenant (uid).
fn accounting(out: &mut String, shared: &DaemonState, queues: &[xsched_core::QueueSnapshot]) {
    let owned: Vec<_> = queues
        .iter()
        .filter_map(|q| shared.registry.owner(q.view.id).map(|o| (q, o)))
        .collect();
    let mut tenants: std::collections::BTreeMap<u32, WireAccount> = Default::default();
    for (_, (peer, _, stats)) in &owned {
        tenants
            .entry(peer.uid)
            .or_insert_with(WireAccount::total)
            .merge(&stats.account);
    }
    for (name, help, value) in COUNTERS {
        let _ = writeln!(
            out,
            "# HELP xsched_queue_{name} {help}.\n# TYPE xsched_queue_{name} counter"
        );
        for (q, (peer, local, stats)) in &owned {
            let process = peer.name.replace(['"', '\\', '\n'], "_");
            let mode = stats.mode_name();
            let _ = writeln!(
                out,
                "xsched_queue_{name}{{pid=\"{}\",uid=\"{}\",process=\"{process}\",device=\"{}\",queue=\"{local}\",mode=\"{mode}\"}} {}",
                peer.pid,
                peer.uid,
                q.view.device.0,
                value(&stats.account)
            );
        }
        let _ = writeln!(
            out,
            "# HELP xsched_tenant_{name} {help}, summed over the tenant's queues.\n# TYPE xsched_tenant_{name} counter"
        );
        for (uid, a) in &tenants {
            let _ = writeln!(out, "xsched_tenant_{name}{{uid=\"{uid}\"}} {}", value(a));
        }
    }
}

/// A counter's name, help and value.
type Counter = (&'static str, &'static str, fn(&WireAccount) -> f64);

/// The accounting counters, from what clients report (measured or estimated device time: see
/// `xsched account`).
const COUNTERS: [Counter; 8] = [
    ("commands_completed_total", "commands completed", |a| {
        a.completed as f64
    }),
    (
        "device_seconds_total",
        "device time of completed commands",
        |a| a.device_ns as f64 / 1e9,
    ),
    (
        "wait_seconds_total",
        "latency less device time of completed commands",
        |a| a.latency_ns.saturating_sub(a.device_ns) as f64 / 1e9,
    ),
    (
        "launch_wait_seconds_total",
        "time commands waited in xsched before launch",
        |a| a.queue_wait_ns as f64 / 1e9,
    ),
    (
        "latency_misses_total",
        "completions later than the SLO or deadline hint",
        |a| a.latency_misses as f64,
    ),
    ("preemptions_total", "suspensions that held work", |a| {
        a.preemptions as f64
    }),
    ("held_seconds_total", "time held by preemptions", |a| {
        a.held_ns as f64 / 1e9
    }),
    (
        "interrupts_total",
        "Level-3 interrupts of commands in flight",
        |a| a.interrupts as f64,
    ),
];
