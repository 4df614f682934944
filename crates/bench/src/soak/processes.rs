//! The soak's processes: the daemon and the clients started, and the disturbances (a client
//! SIGKILLed and replaced, the daemon SIGKILLed and restarted, or stopped and continued) landed
//! evenly over their paced run until every client has finished.

use super::params::SoakParams;
use crate::error::{BenchError, io};
use crate::roles::{self, Role};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One client process and what it was started with.
struct Client {
    child: Child,
    priority: i32,
}

/// The soak's processes.
pub(super) struct Soak<'a> {
    pub(super) exe: &'a Path,
    pub(super) socket: PathBuf,
    pub(super) daemon: Child,
    pub(super) per_client: u64,
    pub(super) rate: u32,
}

impl Soak<'_> {
    pub(super) fn start_daemon(exe: &Path, socket: &Path) -> Result<Child, BenchError> {
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
                return Err(BenchError::NoDaemon(socket.to_path_buf()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(child)
    }

    fn client(&self, priority: i32) -> Result<Client, BenchError> {
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

    fn signal(pid: u32, signal: &str) -> Result<(), BenchError> {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .map_err(io(format!("kill -{signal} {pid}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Io {
                what: format!("kill -{signal} {pid}"),
                source: std::io::Error::other("kill failed"),
            })
        }
    }

    fn restart_daemon(&mut self) -> Result<(), BenchError> {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        self.daemon = Soak::start_daemon(self.exe, &self.socket)?;
        Ok(())
    }

    fn stop_daemon(&self, for_: Duration) -> Result<(), BenchError> {
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
pub(super) enum Disturbance {
    KillClient,
    KillDaemon,
    StopDaemon,
}

/// How many disturbances of each kind landed during the run.
#[derive(Default)]
pub(super) struct Disturbed {
    pub(super) kills: usize,
    pub(super) daemon_kills: usize,
    pub(super) stops: usize,
}

/// What the clients' run left behind.
pub(super) struct SoakRun {
    /// Each finished client's priority and output, in the order they finished.
    pub(super) done: Vec<(i32, std::process::Output)>,
    /// The disturbances that landed.
    pub(super) disturbed: Disturbed,
    /// From the clients' start to the last one's end.
    pub(super) wall: Duration,
}

/// The disturbances (`p.kills` client kills, `p.restarts` daemon disturbances alternating
/// SIGKILL + restart and SIGSTOP), in an order shuffled by `rng`.
pub(super) fn disturbance_plan(p: &SoakParams, rng: &mut Pcg64) -> Vec<Disturbance> {
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
pub(super) fn drive(
    soak: &mut Soak<'_>,
    p: &SoakParams,
    clients: usize,
    mut plan: Vec<Disturbance>,
    rng: &mut Pcg64,
    tick: &dyn Fn(usize, usize),
) -> Result<SoakRun, BenchError> {
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
            return Err(BenchError::Timeout(limit));
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
) -> Result<(), BenchError> {
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
    ) -> Result<(), BenchError> {
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
    pub(super) fn rows_left_after_release(&self) -> Option<usize> {
        let released = Instant::now();
        let mut left = self.rows_left();
        while left != Some(0) && released.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
            left = self.rows_left();
        }
        left
    }
}
