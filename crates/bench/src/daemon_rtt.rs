//! The daemon's own cost: event → operation round trip through `xsched serve` (in this process,
//! over its real Unix socket) beside a raw Unix-socket ping-pong measured in the same run (the
//! floor), and the daemon threads' CPU share at 10 k events/s.

use crate::cpu_share::thread_cpu_ns;
use crate::error::{self, BenchError};
use crate::stats::{none, pct_us};
use crate::{Check, Report};
use hdrhistogram::Histogram;
use serde_json::json;
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xsched_proto::{ClientMsg, DaemonMsg, ProtoError, WireHints, client, read_frame, write_frame};
use xsched_report::{Verdict, cells, columns, round3};

/// What the experiment runs.
#[derive(Clone, Debug)]
pub struct DaemonRttParams {
    /// Round trips measured per path (each of Ready→Suspend and Idle→Resume counts).
    pub samples: u32,
    /// Events per second in the CPU-share phase.
    pub rate: u32,
    /// Length of the CPU-share phase.
    pub phase: Duration,
}

impl Default for DaemonRttParams {
    fn default() -> Self {
        DaemonRttParams {
            samples: 2000,
            rate: 10_000,
            phase: Duration::from_secs(3),
        }
    }
}

fn temp_socket(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("xsched-bench-{}-{name}.sock", std::process::id()))
}

fn expect(s: &mut UnixStream) -> Result<DaemonMsg, BenchError> {
    read_frame::<DaemonMsg>(s)?.ok_or(BenchError::Proto(ProtoError::Closed))
}

/// A client with two queues on one device: `low` (priority 0, ready) and `high` (priority 10).
fn client(path: &Path) -> Result<UnixStream, BenchError> {
    let mut s = client::connect(path, Duration::from_secs(5))?;
    let high = WireHints {
        priority: 10,
        ..WireHints::default()
    };
    for (queue, hints) in [(0, WireHints::default()), (1, high)] {
        write_frame(
            &mut s,
            &ClientMsg::Register {
                queue,
                device: 0,
                hints,
            },
        )?;
    }
    write_frame(&mut s, &ClientMsg::Ready { queue: 0 })?;
    Ok(s)
}

/// The daemon answered something else than the round trip expects.
fn unexpected(answer: &DaemonMsg) -> BenchError {
    ProtoError::Unexpected(format!("{answer:?}")).into()
}

/// One event whose answer is an operation: Ready(high) → Suspend(low) (then Protect(high)), or
/// Idle(high) → Resume(low) (then Unprotect(high)); timed to the first.
fn round_trip(s: &mut UnixStream, ready: bool) -> Result<Duration, BenchError> {
    let t = Instant::now();
    let msg = if ready {
        ClientMsg::Ready { queue: 1 }
    } else {
        ClientMsg::Idle { queue: 1 }
    };
    write_frame(s, &msg)?;
    let elapsed = match expect(s)? {
        DaemonMsg::Suspend { queue: 0 } if ready => t.elapsed(),
        DaemonMsg::Resume { queue: 0 } if !ready => t.elapsed(),
        other => return Err(unexpected(&other)),
    };
    // The same decision protects the high queue while the low one is suspended (and ends
    // that): read it so the next round trip starts clean.
    match expect(s)? {
        DaemonMsg::Protect {
            queue: 1,
            protected,
        } if protected == ready => Ok(elapsed),
        other => Err(unexpected(&other)),
    }
}

/// An echo server: reads one frame, writes it back. The floor of any socket round trip.
fn echo(listener: UnixListener) {
    let Ok((mut s, _)) = listener.accept() else {
        return;
    };
    while let Ok(Some(msg)) = read_frame::<ClientMsg>(&mut s) {
        if write_frame(&mut s, &msg).is_err() {
            return;
        }
    }
}

fn ping(s: &mut UnixStream) -> Result<Duration, BenchError> {
    let t = Instant::now();
    write_frame(s, &ClientMsg::Ready { queue: 1 })?;
    read_frame::<ClientMsg>(s)?.ok_or(BenchError::EchoClosed)?;
    Ok(t.elapsed())
}

fn daemon_threads_ns() -> u64 {
    ["xsched-conn", "xsched-timers", "xsched-daemon"]
        .iter()
        .filter_map(|p| thread_cpu_ns(p))
        .sum()
}

/// Rows `{path, p50_us, p99_us, ratio_to_floor}` plus the CPU-share row.
pub fn run(p: &DaemonRttParams, progress: &dyn Fn(usize, usize)) -> Result<Report, BenchError> {
    let daemon_path = temp_socket("daemon");
    let echo_path = temp_socket("echo");
    let _ = std::fs::remove_file(&echo_path);
    let daemon =
        xsched_daemon::Daemon::bind(&daemon_path, &xsched_core::PolicySpec::default())?.spawn()?;
    let listener = UnixListener::bind(&echo_path).map_err(error::io("binding the echo socket"))?;
    let echo_thread = std::thread::spawn(move || echo(listener));
    let mut to_echo =
        UnixStream::connect(&echo_path).map_err(error::io("connecting to the echo socket"))?;
    let mut to_daemon = client(daemon.path())?;
    progress(0, 2);
    let (floor, through) = sample_round_trips(p.samples, &mut to_echo, &mut to_daemon)?;
    drop(to_echo);
    let _ = echo_thread.join();
    let _ = std::fs::remove_file(&echo_path);
    progress(1, 2);

    let (share, rate) = cpu_share_phase(p, &mut to_daemon)?;
    progress(2, 2);
    to_daemon
        .flush()
        .map_err(error::io("flushing the daemon connection"))?;
    drop(to_daemon);
    daemon.stop();
    Ok(daemon_report(&floor, &through, share, rate))
}

/// `samples` echo pings (the floor) and as many daemon round trips, interleaved; the round
/// trips alternate Ready and Idle and end on an Idle, so the low queue is left resumed.
fn sample_round_trips(
    samples: u32,
    to_echo: &mut UnixStream,
    to_daemon: &mut UnixStream,
) -> Result<(Histogram<u64>, Histogram<u64>), BenchError> {
    let (mut floor, mut through) = (
        xsched_report::new_histogram(),
        xsched_report::new_histogram(),
    );
    for i in 0..samples {
        // Interleaved, after a pause that lets every thread fall asleep, as between real events.
        std::thread::sleep(Duration::from_micros(200));
        xsched_report::record_duration(&mut floor, ping(to_echo)?);
        std::thread::sleep(Duration::from_micros(200));
        xsched_report::record_duration(&mut through, round_trip(to_daemon, i % 2 == 0)?);
    }
    if samples % 2 == 1 {
        round_trip(to_daemon, false)?;
    }
    Ok((floor, through))
}

/// The daemon threads' CPU share (% of one core) and the event rate reached while pairs of
/// events are sent at `p.rate` for `p.phase`.
fn cpu_share_phase(
    p: &DaemonRttParams,
    to_daemon: &mut UnixStream,
) -> Result<(f64, f64), BenchError> {
    // CPU share: pairs of events (Ready, Idle of the high queue), each answered by an operation.
    let pairs_per_ms = (p.rate / 2000).max(1);
    let start = Instant::now();
    let cpu0 = daemon_threads_ns();
    let mut events = 0u64;
    let mut tick = 0u64;
    while start.elapsed() < p.phase {
        tick += 1;
        for _ in 0..pairs_per_ms {
            round_trip(to_daemon, true)?;
            round_trip(to_daemon, false)?;
            events += 2;
        }
        let next = start + Duration::from_millis(tick);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let wall = start.elapsed();
    let cpu = daemon_threads_ns().saturating_sub(cpu0);
    let share = cpu as f64 / wall.as_nanos().max(1) as f64 * 100.0;
    let rate = events as f64 / wall.as_secs_f64();
    Ok((share, rate))
}

/// The report: the floor, the daemon round trip against it, and the daemon's CPU `share` at
/// `rate` events/s.
fn daemon_report(
    floor: &Histogram<u64>,
    through: &Histogram<u64>,
    share: f64,
    rate: f64,
) -> Report {
    let floor_p99 = pct_us(floor, 0.99);
    let floor_p50 = pct_us(floor, 0.5);
    let ratio = |v: f64, f: f64| if f > 0.0 { round3(v / f) } else { 0.0 };
    let (p50, p99) = (pct_us(through, 0.5), pct_us(through, 0.99));
    let rows = vec![
        cells(&[
            ("path", json!("raw unix-socket ping-pong (floor)")),
            ("p50_us", json!(floor_p50)),
            ("p99_us", json!(floor_p99)),
            ("ratio_to_floor", json!("1.0 / 1.0")),
        ]),
        cells(&[
            ("path", json!("event -> operation through the daemon")),
            ("p50_us", json!(p50)),
            ("p99_us", json!(p99)),
            (
                "ratio_to_floor",
                json!(format!(
                    "{} / {}",
                    ratio(p50, floor_p50),
                    ratio(p99, floor_p99)
                )),
            ),
        ]),
        cells(&[
            (
                "path",
                json!(format!(
                    "daemon CPU at {} events/s (% of one core)",
                    rate.round()
                )),
            ),
            ("p50_us", none()),
            ("p99_us", none()),
            ("ratio_to_floor", json!(format!("{:.2} %", share))),
        ]),
    ];
    let checks = vec![Check {
        name: "event -> operation P50 / floor P50".into(),
        target: "<= 1.3".into(),
        measured: format!("{} (P99: {})", ratio(p50, floor_p50), ratio(p99, floor_p99)),
        verdict: Verdict::of(ratio(p50, floor_p50) <= 1.3),
    }];
    Report {
        experiment: "daemon round trip".into(),
        columns: columns(&["path", "p50_us", "p99_us", "ratio_to_floor"]),
        rows,
        checks,
        events: None,
    }
}
