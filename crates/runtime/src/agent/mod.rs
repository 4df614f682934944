//! The client agent (`XSCHED_SCHEDULER=global`): stands in for the scheduler thread and reports
//! to the daemon instead.
//!
//! It consumes the same messages the local scheduler does, forwards them over the daemon's
//! socket, and its link thread applies the daemon's suspend/resume operations through each
//! queue's control as it reads them ([`controls`]).
//! It remembers every queue (device, hints, readiness), so whenever the daemon is not there to
//! schedule them the queues run unscheduled, and when it is back they are all registered again:
//! no command is lost, none runs twice (the agent only ever opens and closes launch gates).
//!
//! "Not there" covers more than an absent socket. The agent pings the daemon every
//! [`PING_EVERY`]; a daemon that has said nothing for [`SILENCE_LIMIT`] (stopped, stuck) is
//! given up on, and every suspended queue resumes, within a second of its last word (logged
//! once). Writes time out after [`WRITE_TIMEOUT`] and never raise SIGPIPE in the host program;
//! connecting and reading happen on a link thread ([`link`]), so this thread never waits for
//! the daemon. A daemon that refuses (another protocol version, an untrusted user) is retried
//! every [`REFUSED_RETRY`], not in a tight loop.

mod controls;
mod link;

use crate::Steer;
use crate::prompt::CpuGuard;
use crate::scheduler::{SchedMsg, SchedulerThread, StatsSource, Steerer};
use controls::Controls;
use crossbeam_channel::{Receiver, Sender, select};
use link::{Conn, Down, Incoming, Trust};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_core::error::chain_text;
use xsched_core::{DeviceId, Nanos, QueueEvent, QueueHints, QueueId};
use xsched_proto::{ClientMsg, DaemonMsg, WireHint, client};

/// How soon to try again after the daemon was unreachable.
const RECONNECT_EVERY: Duration = Duration::from_millis(200);
/// How soon to try again after a daemon refused this client.
const REFUSED_RETRY: Duration = Duration::from_secs(5);
/// How long the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often to ping a connected daemon.
const PING_EVERY: Duration = Duration::from_millis(150);
/// How long a connected daemon may say nothing before it counts as gone. With the ping period
/// this bounds the time from its last word to every queue resumed at 750 ms.
const SILENCE_LIMIT: Duration = Duration::from_millis(600);
/// How long one write to the daemon may block.
const WRITE_TIMEOUT: Duration = Duration::from_millis(100);
/// Frames from the daemon waiting for this thread, at most.
const INCOMING_CAPACITY: usize = 4096;
/// How often queue statistics go to the daemon.
const STATS_EVERY: Duration = Duration::from_secs(1);

/// Start the agent thread for the daemon at `socket`, obeying a daemon of root, this user, or
/// `daemon_uid`.
pub(crate) fn start(socket: PathBuf, daemon_uid: Option<u32>) -> std::io::Result<SchedulerThread> {
    let trust = Trust {
        own_uid: nix::unistd::getuid().as_raw(),
        daemon_uid,
    };
    SchedulerThread::spawn("xsched-agent", move |rx, guard| {
        Agent::new(Arc::new(socket), trust).run(&rx, guard);
    })
}

struct Queue {
    device: DeviceId,
    hints: QueueHints,
    stats: StatsSource,
    steer: Steerer,
    ready: bool,
}

/// The connection, as the agent sees it.
enum Link {
    /// None; the next attempt is due then.
    Down { retry_at: Instant },
    /// A link thread of this generation is connecting.
    Connecting,
    /// Connected: writes go to `writer`.
    Up {
        writer: Conn,
        heard: Instant,
        next_ping: Instant,
        seq: u32,
    },
}

struct Agent {
    socket: Arc<PathBuf>,
    trust: Trust,
    queues: BTreeMap<QueueId, Queue>,
    /// The queues' controls, which the link thread uses to apply the daemon's operations.
    controls: Arc<Controls>,
    link: Link,
    generation: u64,
    incoming_tx: Sender<Incoming>,
    incoming: Receiver<Incoming>,
    next_stats: Instant,
    /// The daemon is known to be away (said once, until it is back).
    warned: bool,
}

impl Agent {
    fn new(socket: Arc<PathBuf>, trust: Trust) -> Agent {
        let (incoming_tx, incoming) = crossbeam_channel::bounded(INCOMING_CAPACITY);
        let now = Instant::now();
        Agent {
            socket,
            trust,
            queues: BTreeMap::new(),
            controls: Arc::new(Controls::new()),
            link: Link::Down { retry_at: now },
            generation: 0,
            incoming_tx,
            incoming,
            next_stats: now + STATS_EVERY,
            warned: false,
        }
    }

    fn run(mut self, rx: &Receiver<SchedMsg>, mut guard: CpuGuard) {
        loop {
            guard.check();
            let wake = self.tick(Instant::now());
            let wait = wake.saturating_duration_since(Instant::now());
            select! {
                recv(rx) -> msg => match msg {
                    Ok(SchedMsg::Shutdown) | Err(_) => break,
                    Ok(msg) => self.handle(msg),
                },
                recv(self.incoming) -> msg => {
                    if let Ok(msg) = msg {
                        self.incoming(msg);
                    }
                }
                default(wait) => {}
            }
        }
        self.drop_link();
        // Nobody will resume a queue after this; a link thread still shaking hands applies
        // nothing and holds no queue.
        self.controls.retire();
    }

    /// Do what is due at `now` (connect, ping, give up on a silent daemon, send statistics);
    /// returns when to be called next at the latest.
    fn tick(&mut self, now: Instant) -> Instant {
        match &mut self.link {
            Link::Down { retry_at } if *retry_at <= now => self.connect(),
            Link::Up { heard, .. } if now.duration_since(*heard) >= SILENCE_LIMIT => {
                self.lost(&format!(
                    "it has not answered for {} ms",
                    SILENCE_LIMIT.as_millis()
                ));
            }
            Link::Up { next_ping, seq, .. } if *next_ping <= now => {
                *next_ping = now + PING_EVERY;
                *seq = seq.wrapping_add(1);
                let ping = ClientMsg::Ping { seq: *seq };
                self.send(&ping);
            }
            _ => {}
        }
        if matches!(self.link, Link::Up { .. }) && self.next_stats <= now {
            self.send_stats(now);
        }
        match &self.link {
            Link::Down { retry_at } => *retry_at,
            Link::Connecting => now + HANDSHAKE_TIMEOUT,
            Link::Up {
                heard, next_ping, ..
            } => (*next_ping)
                .min(*heard + SILENCE_LIMIT)
                .min(self.next_stats),
        }
    }

    /// Start a link thread.
    fn connect(&mut self) {
        self.next_generation();
        let (socket, trust, generation) = (self.socket.clone(), self.trust, self.generation);
        let (tx, controls) = (self.incoming_tx.clone(), self.controls.clone());
        let spawned = std::thread::Builder::new()
            .name("xsched-agent-link".into())
            .spawn(move || {
                // The daemon's operations arrive through it (from a trusted daemon only).
                let mut guard = CpuGuard::start();
                let route = link::Route {
                    generation,
                    tx: &tx,
                    controls: &controls,
                };
                link::run(&socket, trust, HANDSHAKE_TIMEOUT, &route, &mut guard);
            });
        match spawned {
            Ok(_) => self.link = Link::Connecting,
            Err(e) => self.down(Down::Unreachable(format!("cannot start a thread: {e}"))),
        }
    }

    /// Close the connection, if any (its link thread then ends).
    fn drop_link(&mut self) {
        if let Link::Up { writer, .. } = &self.link {
            let _ = writer.stream.shutdown(std::net::Shutdown::Both);
        }
        // Frames of the old generation are ignored from here on.
        self.next_generation();
    }

    /// A new link generation; the old link thread applies no operation from here on.
    fn next_generation(&mut self) {
        self.generation += 1;
        self.controls.set_generation(self.generation);
    }

    /// The link is down: run unscheduled, retry later, say so once.
    fn down(&mut self, why: Down) {
        self.drop_link();
        let (why, retry) = match why {
            Down::Unreachable(why) => (why, RECONNECT_EVERY),
            Down::Refused(why) => (format!("refused: {why}"), REFUSED_RETRY),
        };
        self.link = Link::Down {
            retry_at: Instant::now() + retry,
        };
        if !self.warned {
            tracing::warn!(
                "xsched daemon at {} unavailable ({why}); queues run unscheduled until it is back",
                self.socket.display()
            );
            self.warned = true;
        }
        self.resume_all();
    }

    fn lost(&mut self, why: &str) {
        self.down(Down::Unreachable(why.to_string()));
    }

    fn resume_all(&self) {
        self.controls.resume_all();
    }

    /// Write `msg` to the daemon; whether it was written (not without a link, nor when the
    /// write failed and the link was given up).
    fn send(&mut self, msg: &ClientMsg) -> bool {
        let Link::Up { writer, .. } = &self.link else {
            return false;
        };
        match client::send_frame(&writer.stream, msg) {
            Ok(()) => true,
            Err(e) => {
                self.lost(&format!("writing: {}", chain_text(&e)));
                false
            }
        }
    }

    fn send_stats(&mut self, now: Instant) {
        self.next_stats = now + STATS_EVERY;
        let msgs: Vec<ClientMsg> = self
            .queues
            .iter()
            .map(|(&id, q)| ClientMsg::Stats {
                queue: id.0,
                stats: (q.stats)(),
            })
            .collect();
        for m in &msgs {
            self.send(m);
        }
    }

    fn register_all(&mut self) {
        let msgs: Vec<ClientMsg> = self
            .queues
            .iter()
            .flat_map(|(&id, q)| {
                let register = ClientMsg::Register {
                    queue: id.0,
                    device: q.device.0,
                    hints: q.hints.into(),
                };
                let ready = q.ready.then_some(ClientMsg::Ready { queue: id.0 });
                std::iter::once(register).chain(ready)
            })
            .collect();
        for m in &msgs {
            self.send_stamped(m);
        }
    }

    /// [`send`](Self::send), stamping a Ready that was written ([`Stamp::ReadySent`]).
    ///
    /// [`Stamp::ReadySent`]: crate::stamps::Stamp::ReadySent
    fn send_stamped(&mut self, msg: &ClientMsg) {
        if self.send(msg) && matches!(msg, ClientMsg::Ready { .. }) {
            crate::stamps::stamp(crate::stamps::Stamp::ReadySent);
        }
    }

    fn handle(&mut self, msg: SchedMsg) {
        match msg {
            SchedMsg::Register {
                queue,
                device,
                hints,
                control,
                stats,
                steer,
            } => {
                self.controls.insert(queue, control);
                self.queues.insert(
                    queue,
                    Queue {
                        device,
                        hints,
                        stats,
                        steer,
                        ready: false,
                    },
                );
                self.send(&ClientMsg::Register {
                    queue: queue.0,
                    device: device.0,
                    hints: hints.into(),
                });
            }
            SchedMsg::Event(_, event) => self.event(event),
            SchedMsg::SetPolicy(_, spec) => {
                self.send(&ClientMsg::SetPolicy {
                    name: spec.to_string(),
                });
            }
            SchedMsg::Snapshot(reply) => {
                let _ = reply.send((Vec::new(), "global"));
            }
            SchedMsg::Shutdown => {}
        }
    }

    fn event(&mut self, event: QueueEvent) {
        let msg = match event {
            QueueEvent::Ready(q) => {
                self.set_ready(q, true);
                ClientMsg::Ready { queue: q.0 }
            }
            QueueEvent::Idle(q) => {
                self.set_ready(q, false);
                ClientMsg::Idle { queue: q.0 }
            }
            QueueEvent::Hint { queue, hint } => {
                if let Some(q) = self.queues.get_mut(&queue)
                    && q.hints.apply(hint).is_err()
                {
                    return;
                }
                ClientMsg::Hint {
                    queue: queue.0,
                    hint: WireHint::from(hint),
                }
            }
            QueueEvent::Unregister(q) => {
                self.queues.remove(&q);
                self.controls.remove(q);
                ClientMsg::Unregister { queue: q.0 }
            }
            QueueEvent::Register { .. } => return,
        };
        self.send_stamped(&msg);
    }

    fn set_ready(&mut self, queue: QueueId, ready: bool) {
        if let Some(q) = self.queues.get_mut(&queue) {
            q.ready = ready;
        }
    }

    fn incoming(&mut self, msg: Incoming) {
        let (Incoming::Up(generation, _)
        | Incoming::Msg(generation, _)
        | Incoming::Down(generation, _)) = &msg;
        if *generation != self.generation {
            return;
        }
        match msg {
            Incoming::Up(_, writer) => self.up(writer),
            Incoming::Msg(_, msg) => {
                if let Link::Up { heard, .. } = &mut self.link {
                    *heard = Instant::now();
                }
                self.obey(msg);
            }
            Incoming::Down(_, why) => self.down(why),
        }
    }

    fn up(&mut self, writer: Conn) {
        if let Err(e) = writer.stream.set_write_timeout(Some(WRITE_TIMEOUT)) {
            return self.lost(&e.to_string());
        }
        let now = Instant::now();
        self.link = Link::Up {
            writer,
            heard: now,
            next_ping: now + PING_EVERY,
            seq: 0,
        };
        if std::mem::take(&mut self.warned) {
            tracing::warn!("xsched daemon at {} is back", self.socket.display());
        }
        self.register_all();
    }

    fn obey(&mut self, msg: DaemonMsg) {
        match msg {
            // Suspend, Resume and Protect were applied by the link thread (`controls`).
            DaemonMsg::SetMode { queue, mode } => self.steer(queue, Steer::Mode(mode.into())),
            DaemonMsg::Bounds {
                queue,
                max_pending,
                inflight_us,
            } => self.steer(
                queue,
                Steer::Bounds {
                    max_pending: max_pending
                        .and_then(|n| NonZeroUsize::new(usize::try_from(n).unwrap_or(usize::MAX))),
                    inflight: inflight_us.map(Nanos::from_us),
                },
            ),
            DaemonMsg::Error { message } => tracing::warn!("xsched daemon: {message}"),
            _ => {}
        }
    }

    fn steer(&self, queue: u32, request: Steer) {
        if let Some(q) = self.queues.get(&QueueId(queue)) {
            (q.steer)(request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn send_says_whether_the_daemon_got_the_frame() {
        let trust = Trust {
            own_uid: 0,
            daemon_uid: None,
        };
        let mut agent = Agent::new(Arc::new(PathBuf::from("/nonexistent/xsched.sock")), trust);
        assert!(!agent.send(&ClientMsg::Ping { seq: 1 }), "no link");
        let (ours, theirs) = UnixStream::pair().expect("pair");
        agent.up(Conn::new(ours));
        assert!(agent.send(&ClientMsg::Ping { seq: 2 }), "written");
        drop(theirs);
        assert!(
            !agent.send(&ClientMsg::Ping { seq: 3 }),
            "the daemon is gone"
        );
        assert!(matches!(agent.link, Link::Down { .. }), "and given up");
    }
}
