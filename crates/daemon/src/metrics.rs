//! Prometheus metrics (`xsched serve --metrics-addr 127.0.0.1:PORT`): queue states, operations
//! issued, client counts and queue statistics, in the text exposition format at `/metrics`.
//!
//! The endpoint answers plain HTTP/1.0-style GETs, one request per connection, which is all a
//! Prometheus scraper needs; anything else gets a 404 or 400. It never blocks the scheduler: it
//! takes a snapshot and formats it outside the scheduler's lock.

use crate::server::Shared;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Serve `/metrics` on `addr` from a background thread. Returns the bound address.
pub(crate) fn start(
    addr: impl ToSocketAddrs,
    shared: Arc<Shared>,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("xsched-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if shared.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let _ = answer(stream, &shared);
            }
        })?;
    Ok(local)
}

fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut request_line = String::new();
    BufReader::new(&stream).read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let (status, body) = match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", render(shared)),
        (Some("GET"), Some(_)) => ("404 Not Found", "only /metrics is served\n".to_string()),
        _ => ("400 Bad Request", "expected GET /metrics\n".to_string()),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The metrics text.
pub(crate) fn render(shared: &Shared) -> String {
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
    out
}
