//! `xsched bench soak`: client processes under a daemon that is killed, stopped and restarted
//! while some clients are killed too; every command of every surviving client must run exactly
//! once, and the daemon must hold no queue of a dead client.
//!
//! Each client (`xsched worker --role soak`) submits host commands through the global scheduler
//! at a paced rate (so the run lasts long enough for every disturbance to land in it); each
//! command counts its own runs in its own slot, so the client can say at the end how many ran
//! exactly once, more than once, or never. This module starts a daemon (`xsched serve`), the
//! clients (priorities 0, 5 and 10 in turn, so the daemon suspends and resumes them), and then,
//! in an order drawn from the seed, SIGKILLs random clients (each replaced by a fresh one with
//! the same work, so the surviving clients still submit every command) and disturbs the daemon:
//! SIGKILL and a fresh daemon on the same socket, or SIGSTOP for a while and SIGCONT,
//! alternately. Clients run unscheduled while the daemon is away and register again when it is
//! back; nothing may be lost or run twice.

use crate::Report;
use crate::roles::{self, Role};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_report::{Check, Verdict, cells, columns};
use xsched_runtime::{RuntimeError, XQueue};

/// What a soak run does.
#[derive(Clone, Debug)]
pub struct SoakParams {
    /// Client processes alive at once.
    pub clients: usize,
    /// Commands in all, split evenly over the clients.
    pub commands: u64,
    /// Clients SIGKILLed (and replaced) during the run.
    pub kills: usize,
    /// Daemon disturbances: SIGKILL + restart and SIGSTOP/SIGCONT, alternately.
    pub restarts: usize,
    /// How long a stopped daemon stays stopped.
    pub stopped_for: Duration,
    /// Commands per second each client submits: with the commands per client this sets the
    /// run's length; the disturbances are spread evenly over it.
    pub rate: u32,
    /// Orders the disturbances and picks the clients to kill.
    pub seed: u64,
}

impl Default for SoakParams {
    fn default() -> Self {
        SoakParams {
            clients: 8,
            commands: 1_000_000,
            kills: 4,
            restarts: 3,
            stopped_for: Duration::from_millis(1500),
            rate: 10_000,
            seed: 1,
        }
    }
}

/// Why a soak could not run (a failed check is not an error: it is in the report).
#[derive(Debug, Error)]
pub enum SoakError {
    /// A process could not be started, signalled or waited for.
    #[error("{what}: {source}")]
    Io {
        /// Which step.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The daemon did not come up.
    #[error("the daemon did not listen on {0} within 10 s")]
    NoDaemon(PathBuf),
    /// A surviving client failed or printed something that is not its report.
    #[error("client {pid} failed: {why}")]
    Client {
        /// Its pid.
        pid: u32,
        /// What went wrong.
        why: String,
    },
    /// The run did not finish in time.
    #[error("the clients did not finish within {0:?}")]
    Timeout(Duration),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SoakError {
    let what = what.into();
    move |source| SoakError::Io { what, source }
}

/// `xsched worker --role soak`: `commands` host commands with at most `window` outstanding, at
/// `rate` per second (0: unpaced), each counting its runs; how many ran once, more, never.
pub fn client(
    queue: &XQueue<CpuQueue>,
    commands: u32,
    window: usize,
    rate: u32,
) -> Result<Value, RuntimeError> {
    let start = Instant::now();
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..commands).map(|_| AtomicU8::new(0)).collect());
    let mut outstanding = VecDeque::new();
    let mut failed = 0u64;
    let mut settle = |h: xsched_runtime::CommandHandle| {
        if h.wait().is_err() {
            failed += 1;
        }
    };
    for i in 0..commands as usize {
        if rate > 0 && i % 64 == 0 {
            let due = start + Duration::from_secs_f64(i as f64 / f64::from(rate));
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        let runs = runs.clone();
        outstanding.push_back(queue.submit(CpuCommand::host(move || {
            runs[i].fetch_add(1, Ordering::SeqCst);
        }))?);
        if outstanding.len() > window.max(1)
            && let Some(h) = outstanding.pop_front()
        {
            settle(h);
        }
    }
    for h in outstanding {
        settle(h);
    }
    let count =
        |f: &dyn Fn(u8) -> bool| runs.iter().filter(|r| f(r.load(Ordering::SeqCst))).count();
    Ok(json!({
        "commands": commands,
        "exactly_once": count(&|n| n == 1),
        "more_than_once": count(&|n| n > 1),
        "never": count(&|n| n == 0),
        "failed": failed,
    }))
}

/// One client process and what it was started with.
struct Client {
    child: Child,
    priority: i32,
}

/// The soak's processes.
struct Soak<'a> {
    exe: &'a Path,
    socket: PathBuf,
    daemon: Child,
    per_client: u64,
    rate: u32,
}

impl Soak<'_> {
    fn start_daemon(exe: &Path, socket: &Path) -> Result<Child, SoakError> {
        let child = Command::new(exe)
            .args(["serve", "--socket"])
            .arg(socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io("starting the daemon"))?;
        let start = Instant::now();
        while UnixStream::connect(socket).is_err() {
            if start.elapsed() > Duration::from_secs(10) {
                return Err(SoakError::NoDaemon(socket.to_path_buf()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(child)
    }

    fn client(&self, priority: i32) -> Result<Client, SoakError> {
        let child = roles::command(self.exe, Role::Soak)
            .args(["--window", "64", "--commands"])
            .arg(self.per_client.to_string())
            .arg("--rate")
            .arg(self.rate.to_string())
            .env("XSCHED_SCHEDULER", "global")
            .env("XSCHED_SOCKET", &self.socket)
            .env("XSCHED_PRIORITY", priority.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io("starting a client"))?;
        Ok(Client { child, priority })
    }

    fn signal(pid: u32, signal: &str) -> Result<(), SoakError> {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .map_err(io(format!("kill -{signal} {pid}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(SoakError::Io {
                what: format!("kill -{signal} {pid}"),
                source: std::io::Error::other("kill failed"),
            })
        }
    }

    fn restart_daemon(&mut self) -> Result<(), SoakError> {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        self.daemon = Soak::start_daemon(self.exe, &self.socket)?;
        Ok(())
    }

    fn stop_daemon(&self, for_: Duration) -> Result<(), SoakError> {
        Soak::signal(self.daemon.id(), "STOP")?;
        std::thread::sleep(for_);
        Soak::signal(self.daemon.id(), "CONT")
    }

    /// Rows the daemon still shows (`None` if it does not answer).
    fn rows_left(&self) -> Option<usize> {
        let mut s = xsched_proto::client::connect(&self.socket, Duration::from_secs(2)).ok()?;
        xsched_proto::client::top(&mut s).ok().map(|r| r.len())
    }
}

impl Drop for Soak<'_> {
    fn drop(&mut self) {
        let _ = Soak::signal(self.daemon.id(), "CONT");
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A disturbance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disturbance {
    KillClient,
    KillDaemon,
    StopDaemon,
}

/// Run a soak with `exe` (the `xsched` binary) for its daemon and clients.
pub fn run(exe: &Path, p: &SoakParams, tick: &dyn Fn(usize, usize)) -> Result<Report, SoakError> {
    let clients = p.clients.max(1);
    let per_client = (p.commands / clients as u64).max(1);
    let dir = std::env::temp_dir().join(format!("xsched-soak-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    let socket = dir.join("xsched.sock");
    let daemon = Soak::start_daemon(exe, &socket)?;
    let mut soak = Soak {
        exe,
        socket,
        daemon,
        per_client,
        rate: p.rate,
    };
    let mut rng = Pcg64::seed_from_u64(p.seed);
    let mut plan: Vec<Disturbance> = std::iter::repeat_n(Disturbance::KillClient, p.kills)
        .chain((0..p.restarts).map(|i| {
            if i % 2 == 0 {
                Disturbance::KillDaemon
            } else {
                Disturbance::StopDaemon
            }
        }))
        .collect();
    plan.shuffle(&mut rng);

    let started = Instant::now();
    let mut live: Vec<Client> = (0..clients)
        .map(|i| soak.client([0, 5, 10][i % 3]))
        .collect::<Result<_, _>>()?;
    let mut done: Vec<(i32, std::process::Output)> = Vec::new();
    let (mut kills, mut daemon_kills, mut stops) = (0usize, 0usize, 0usize);
    // Spread the disturbances evenly over the paced run.
    let length = Duration::from_secs_f64(per_client as f64 / f64::from(p.rate.max(1)));
    let spacing = length.div_f64((plan.len() + 1) as f64);
    let mut next = started + spacing;
    let limit = Duration::from_secs(1800);
    while !live.is_empty() {
        // Collect the clients that finished.
        let mut i = 0;
        while i < live.len() {
            if matches!(live[i].child.try_wait(), Ok(Some(_))) {
                let Client { child, priority } = live.swap_remove(i);
                let pid = child.id();
                let out = child
                    .wait_with_output()
                    .map_err(io(format!("waiting for client {pid}")))?;
                done.push((priority, out));
                tick(done.len(), clients);
            } else {
                i += 1;
            }
        }
        if Instant::now() >= next && !plan.is_empty() && !live.is_empty() {
            next += spacing;
            match plan.remove(0) {
                Disturbance::KillClient => {
                    let victim = rng.random_range(0..live.len());
                    let mut c = live.swap_remove(victim);
                    let _ = c.child.kill();
                    let _ = c.child.wait();
                    kills += 1;
                    live.push(soak.client(c.priority)?);
                }
                Disturbance::KillDaemon => {
                    soak.restart_daemon()?;
                    daemon_kills += 1;
                }
                Disturbance::StopDaemon => {
                    soak.stop_daemon(p.stopped_for)?;
                    stops += 1;
                }
            }
        }
        if started.elapsed() > limit {
            return Err(SoakError::Timeout(limit));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = started.elapsed();

    let mut rows = Vec::new();
    let (mut once, mut more, mut never, mut failed) = (0u64, 0u64, 0u64, 0u64);
    for (priority, out) in &done {
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(text.trim()).map_err(|e| SoakError::Client {
            pid: 0,
            why: format!("{e}: {text:?} (exit {:?})", out.status),
        })?;
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        once += n("exactly_once");
        more += n("more_than_once");
        never += n("never");
        failed += n("failed");
        rows.push(cells(&[
            ("priority", json!(priority)),
            ("commands", json!(n("commands"))),
            ("exactly_once", json!(n("exactly_once"))),
            ("more_than_once", json!(n("more_than_once"))),
            ("never", json!(n("never"))),
            ("failed", json!(n("failed"))),
        ]));
    }
    // The daemon must hold nothing of the clients now gone (killed ones included).
    let released = Instant::now();
    let mut left = soak.rows_left();
    while left != Some(0) && released.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        left = soak.rows_left();
    }
    let expected = per_client * clients as u64;
    let checks = vec![
        Check {
            name: "every command of every surviving client ran exactly once".into(),
            target: format!("{expected} of {expected} ({clients} clients × {per_client})"),
            measured: format!(
                "{once} exactly once, {more} more than once, {never} never, {failed} failed"
            ),
            verdict: Verdict::of(once == expected && more == 0 && never == 0 && failed == 0),
        },
        Check {
            name: "clients SIGKILLed and replaced during the run".into(),
            target: format!("{}", p.kills),
            measured: format!("{kills}"),
            verdict: Verdict::of(kills == p.kills),
        },
        Check {
            name: "daemon disturbances during the run".into(),
            target: format!(
                "{} (SIGKILL + restart, SIGSTOP/SIGCONT alternately)",
                p.restarts
            ),
            measured: format!(
                "{daemon_kills} SIGKILL + restart, {stops} SIGSTOP {:.1} s + SIGCONT",
                p.stopped_for.as_secs_f64()
            ),
            verdict: Verdict::of(daemon_kills + stops == p.restarts),
        },
        Check {
            name: "no queue of a gone client left in the daemon".into(),
            target: "0 rows in top".into(),
            measured: left.map_or_else(|| "no answer".into(), |n| format!("{n} rows")),
            verdict: Verdict::of(left == Some(0)),
        },
    ];
    rows.push(cells(&[
        ("priority", json!("all")),
        ("commands", json!(expected)),
        ("exactly_once", json!(once)),
        ("more_than_once", json!(more)),
        ("never", json!(never)),
        ("failed", json!(failed)),
        ("wall_s", json!(xsched_report::round1(wall.as_secs_f64()))),
        (
            "commands_per_s",
            json!((expected as f64 / wall.as_secs_f64()).round()),
        ),
    ]));
    let _ = std::fs::remove_dir(&dir);
    Ok(Report::new(
        format!(
            "soak: {clients} client processes, {expected} commands, {} client kills, {} daemon \
             disturbances",
            p.kills, p.restarts
        ),
        columns(&[
            "priority",
            "commands",
            "exactly_once",
            "more_than_once",
            "never",
            "failed",
            "wall_s",
            "commands_per_s",
        ]),
        rows,
    )
    .with_checks(checks))
}
