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
    let plan = disturbance_plan(p, &mut rng);
    let outcome = drive(&mut soak, p, clients, plan, &mut rng, tick)?;
    let (mut rows, tally) = tally_clients(&outcome.done)?;
    // The daemon must hold nothing of the clients now gone (killed ones included).
    let left = soak.rows_left_after_release();
    let expected = per_client * clients as u64;
    let checks = soak_checks(p, clients, per_client, &tally, &outcome.disturbed, left);
    rows.push(total_row(expected, &tally, outcome.wall));
    let _ = std::fs::remove_dir(&dir);
    Ok(soak_report(p, clients, expected, rows).with_checks(checks))
}

/// How many disturbances of each kind landed during the run.
#[derive(Default)]
struct Disturbed {
    kills: usize,
    daemon_kills: usize,
    stops: usize,
}

/// What the clients' run left behind.
struct SoakRun {
    /// Each finished client's priority and output, in the order they finished.
    done: Vec<(i32, std::process::Output)>,
    /// The disturbances that landed.
    disturbed: Disturbed,
    /// From the clients' start to the last one's end.
    wall: Duration,
}

/// The finished clients' reports, summed.
#[derive(Default)]
struct Tally {
    once: u64,
    more: u64,
    never: u64,
    failed: u64,
}

/// The disturbances (`p.kills` client kills, `p.restarts` daemon disturbances alternating
/// SIGKILL + restart and SIGSTOP), in an order shuffled by `rng`.
fn disturbance_plan(p: &SoakParams, rng: &mut Pcg64) -> Vec<Disturbance> {
    let mut plan: Vec<Disturbance> = std::iter::repeat_n(Disturbance::KillClient, p.kills)
        .chain((0..p.restarts).map(|i| {
            if i % 2 == 0 {
                Disturbance::KillDaemon
            } else {
                Disturbance::StopDaemon
            }
        }))
        .collect();
    plan.shuffle(rng);
    plan
}

/// Starts `clients` clients and lands `plan` evenly over their paced run until every client
/// (killed ones replaced) has finished.
fn drive(
    soak: &mut Soak<'_>,
    p: &SoakParams,
    clients: usize,
    mut plan: Vec<Disturbance>,
    rng: &mut Pcg64,
    tick: &dyn Fn(usize, usize),
) -> Result<SoakRun, SoakError> {
    let started = Instant::now();
    let mut live: Vec<Client> = (0..clients)
        .map(|i| soak.client([0, 5, 10][i % 3]))
        .collect::<Result<_, _>>()?;
    let mut done: Vec<(i32, std::process::Output)> = Vec::new();
    let mut disturbed = Disturbed::default();
    // Spread the disturbances evenly over the paced run.
    let length = Duration::from_secs_f64(soak.per_client as f64 / f64::from(p.rate.max(1)));
    let spacing = length.div_f64((plan.len() + 1) as f64);
    let mut next = started + spacing;
    let limit = Duration::from_secs(1800);
    while !live.is_empty() {
        collect_finished(&mut live, &mut done, clients, tick)?;
        if Instant::now() >= next && !plan.is_empty() && !live.is_empty() {
            next += spacing;
            let what = plan.remove(0);
            soak.disturb(what, &mut live, rng, p.stopped_for, &mut disturbed)?;
        }
        if started.elapsed() > limit {
            return Err(SoakError::Timeout(limit));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(SoakRun {
        done,
        disturbed,
        wall: started.elapsed(),
    })
}

/// Moves the clients of `live` that have exited into `done` with their output, ticking each.
fn collect_finished(
    live: &mut Vec<Client>,
    done: &mut Vec<(i32, std::process::Output)>,
    clients: usize,
    tick: &dyn Fn(usize, usize),
) -> Result<(), SoakError> {
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
    Ok(())
}

impl Soak<'_> {
    /// Lands one disturbance: SIGKILLs a random client of `live` and starts its replacement,
    /// or kills and restarts the daemon, or stops it for `stopped_for`; counts it in `count`.
    fn disturb(
        &mut self,
        what: Disturbance,
        live: &mut Vec<Client>,
        rng: &mut Pcg64,
        stopped_for: Duration,
        count: &mut Disturbed,
    ) -> Result<(), SoakError> {
        match what {
            Disturbance::KillClient => {
                let victim = rng.random_range(0..live.len());
                let mut c = live.swap_remove(victim);
                let _ = c.child.kill();
                let _ = c.child.wait();
                count.kills += 1;
                live.push(self.client(c.priority)?);
            }
            Disturbance::KillDaemon => {
                self.restart_daemon()?;
                count.daemon_kills += 1;
            }
            Disturbance::StopDaemon => {
                self.stop_daemon(stopped_for)?;
                count.stops += 1;
            }
        }
        Ok(())
    }

    /// Rows the daemon still shows once it has had up to 5 s to drop them (`None` if it does
    /// not answer).
    fn rows_left_after_release(&self) -> Option<usize> {
        let released = Instant::now();
        let mut left = self.rows_left();
        while left != Some(0) && released.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
            left = self.rows_left();
        }
        left
    }
}

/// Parses each finished client's report into a row of its own, and sums them.
fn tally_clients(
    done: &[(i32, std::process::Output)],
) -> Result<(Vec<xsched_report::Row>, Tally), SoakError> {
    let mut rows = Vec::new();
    let mut t = Tally::default();
    for (priority, out) in done {
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(text.trim()).map_err(|e| SoakError::Client {
            pid: 0,
            why: format!("{e}: {text:?} (exit {:?})", out.status),
        })?;
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        t.once += n("exactly_once");
        t.more += n("more_than_once");
        t.never += n("never");
        t.failed += n("failed");
        rows.push(cells(&[
            ("priority", json!(priority)),
            ("commands", json!(n("commands"))),
            ("exactly_once", json!(n("exactly_once"))),
            ("more_than_once", json!(n("more_than_once"))),
            ("never", json!(n("never"))),
            ("failed", json!(n("failed"))),
        ]));
    }
    Ok((rows, t))
}

/// The soak's checks: exactly once, the client kills, the daemon disturbances and the rows
/// `left` in the daemon.
fn soak_checks(
    p: &SoakParams,
    clients: usize,
    per_client: u64,
    t: &Tally,
    d: &Disturbed,
    left: Option<usize>,
) -> Vec<Check> {
    let expected = per_client * clients as u64;
    let (once, more, never, failed) = (t.once, t.more, t.never, t.failed);
    let (kills, daemon_kills, stops) = (d.kills, d.daemon_kills, d.stops);
    vec![
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
    ]
}

/// The row of all clients together, with the run's wall time and command rate.
fn total_row(expected: u64, t: &Tally, wall: Duration) -> xsched_report::Row {
    cells(&[
        ("priority", json!("all")),
        ("commands", json!(expected)),
        ("exactly_once", json!(t.once)),
        ("more_than_once", json!(t.more)),
        ("never", json!(t.never)),
        ("failed", json!(t.failed)),
        ("wall_s", json!(xsched_report::round1(wall.as_secs_f64()))),
        (
            "commands_per_s",
            json!((expected as f64 / wall.as_secs_f64()).round()),
        ),
    ])
}

/// The soak's report (without its checks) over `rows`.
fn soak_report(
    p: &SoakParams,
    clients: usize,
    expected: u64,
    rows: Vec<xsched_report::Row>,
) -> Report {
    Report::new(
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
}
