//! The daemon in this process with an in-process client (a global-mode runtime): fixed priority
//! across clients, and the Prometheus endpoint reflecting it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::Spin;
use xsched_backend_cpu::{CpuCommand, CpuDevice};
use xsched_core::Hint;
use xsched_daemon::Daemon;
use xsched_runtime::{QueueOptions, Runtime, RuntimeConfig, WhoSchedules};

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("metrics endpoint");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response");
    body
}

#[test]
fn metrics_show_queues_and_operations() {
    let socket = std::env::temp_dir().join(format!("xsched-metrics-{}.sock", std::process::id()));
    let daemon = Daemon::bind(&socket, &xsched_core::PolicySpec::default()).expect("bind");
    let addr = daemon.serve_metrics("127.0.0.1:0").expect("metrics");
    let daemon = daemon.spawn().expect("serve");
    let global = || {
        Runtime::new(RuntimeConfig {
            scheduler: WhoSchedules::Global,
            socket: Some(socket.clone()),
            ..RuntimeConfig::default()
        })
        .expect("runtime")
    };
    let (rt_bg, rt_fg) = (global(), global());
    let device = CpuDevice::new(1).expect("device");
    let bg = rt_bg
        .create_queue(Arc::new(device.create_queue()), QueueOptions::default())
        .expect("bg");
    let fg = rt_fg
        .create_queue(
            Arc::new(device.create_queue()),
            QueueOptions::default()
                .with_hint(Hint::Priority(5))
                .expect("hint"),
        )
        .expect("fg");
    let kernel = Arc::new(Spin::new(Duration::from_millis(1)));
    for _ in 0..200 {
        bg.submit(CpuCommand::Kernel(kernel.clone()))
            .expect("bg submit");
    }
    let start = Instant::now();
    loop {
        fg.submit(CpuCommand::Kernel(kernel.clone()))
            .expect("fg submit")
            .wait()
            .expect("fg done");
        let text = get(addr, "/metrics");
        let suspends = text
            .lines()
            .find_map(|l| l.strip_prefix("xsched_operations_total{op=\"suspend\"} "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if suspends > 0 && text.contains("xsched_queue_ready{") {
            assert!(text.starts_with("HTTP/1.1 200 OK"));
            assert!(text.contains("priority=\"5\""), "{text}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no suspension seen:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The accounting the clients report (about once a second), per queue and per tenant.
    let uid =
        std::fs::metadata("/proc/self").map_or(0, |m| std::os::unix::fs::MetadataExt::uid(&m));
    let tenant = format!("xsched_tenant_commands_completed_total{{uid=\"{uid}\"}} ");
    loop {
        let text = get(addr, "/metrics");
        let completed = text
            .lines()
            .find_map(|l| l.strip_prefix(tenant.as_str()))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if completed > 0.0 {
            assert!(text.contains("# TYPE xsched_queue_device_seconds_total counter"));
            assert!(text.contains("xsched_queue_preemptions_total{"), "{text}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no accounting seen:\n{text}"
        );
        fg.submit(CpuCommand::Kernel(kernel.clone()))
            .expect("fg submit")
            .wait()
            .expect("fg done");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
    bg.cancel_pending().expect("cancel");
    drop((bg, fg));
    daemon.stop();
}

#[test]
fn silent_and_oversized_scrapers_hold_up_no_one() {
    let socket =
        std::env::temp_dir().join(format!("xsched-metrics-silent-{}.sock", std::process::id()));
    let daemon = Daemon::bind(&socket, &xsched_core::PolicySpec::default()).expect("bind");
    let addr = daemon.serve_metrics("127.0.0.1:0").expect("metrics");
    let daemon = daemon.spawn().expect("serve");
    // Scrapers that connect and say nothing: fewer than the concurrency limit, so each holds a
    // thread (until its read times out, 2 s) but not the endpoint.
    let mut silent: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    assert!(get(addr, "/metrics").starts_with("HTTP/1.1 200 OK"));
    // No clock bound: the scrape was answered while every silent connection was still held
    // open. Had it waited behind them, their read timeouts would have closed them first (the
    // endpoint closes a connection whose request line times out), and a read here would see
    // the end of the stream instead of nothing yet.
    for (i, s) in silent.iter_mut().enumerate() {
        s.set_nonblocking(true).expect("nonblocking");
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!(
                "silent connection {i} was closed or answered before the scrape: {other:?} \
                 (the scrape waited behind it)"
            ),
        }
    }
    let mut long = TcpStream::connect(addr).expect("connect");
    let line = format!("GET /{} HTTP/1.1\r\n\r\n", "x".repeat(20_000));
    let _ = long.write_all(line.as_bytes());
    let mut answer = String::new();
    let _ = long.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    drop(silent);
    daemon.stop();
}
