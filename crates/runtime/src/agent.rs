//! The client agent (`XSCHED_SCHEDULER=global`): stands in for the scheduler thread and reports
//! to the daemon instead.
//!
//! It consumes the same messages the local scheduler does, forwards them over the daemon's
//! socket, and applies the daemon's suspend/resume operations through each queue's control.
//! It remembers every queue (device, hints, readiness), so when the daemon is absent it lets
//! the queues run unscheduled (and says so once), and when it comes back re-registers them all:
//! no command is lost and nothing waits on a daemon that is not there.

use crate::scheduler::{Control, SchedMsg, SchedulerThread, StatsSource};
use crossbeam_channel::{Receiver, Sender, select};
use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use xsched_core::{DeviceId, Event, Operation, QueueHints, QueueId};
use xsched_proto::{ClientMsg, DaemonMsg, WireHint, client, read_frame, write_frame};

/// How often to try reaching an absent daemon.
const RECONNECT_EVERY: Duration = Duration::from_millis(200);
/// How long the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// Start the agent thread for the daemon at `socket`.
pub(crate) fn start(socket: PathBuf) -> std::io::Result<SchedulerThread> {
    SchedulerThread::spawn("xsched-agent", move |rx| Agent::new(socket).run(&rx))
}

struct Queue {
    device: DeviceId,
    hints: QueueHints,
    control: Control,
    stats: StatsSource,
    ready: bool,
}

/// How often queue statistics go to the daemon.
const STATS_EVERY: Duration = Duration::from_secs(1);

/// What the reader thread reports: a message of connection `generation`, or its end.
enum Incoming {
    Msg(u64, DaemonMsg),
    Gone(u64),
}

struct Agent {
    socket: PathBuf,
    queues: BTreeMap<QueueId, Queue>,
    writer: Option<UnixStream>,
    generation: u64,
    incoming_tx: Sender<Incoming>,
    incoming: Receiver<Incoming>,
    next_attempt: Instant,
    next_stats: Instant,
    warned: bool,
}

impl Agent {
    fn new(socket: PathBuf) -> Agent {
        let (incoming_tx, incoming) = crossbeam_channel::unbounded();
        Agent {
            socket,
            queues: BTreeMap::new(),
            writer: None,
            generation: 0,
            incoming_tx,
            incoming,
            next_attempt: Instant::now(),
            next_stats: Instant::now() + STATS_EVERY,
            warned: false,
        }
    }

    fn run(mut self, rx: &Receiver<SchedMsg>) {
        loop {
            if self.writer.is_none() && Instant::now() >= self.next_attempt {
                self.connect();
            }
            if self.writer.is_some() && Instant::now() >= self.next_stats {
                self.send_stats();
            }
            let until = if self.writer.is_some() {
                self.next_stats
            } else {
                self.next_attempt
            };
            let wait = until.saturating_duration_since(Instant::now());
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
        // Nobody will resume a queue after this.
        self.resume_all();
    }

    fn connect(&mut self) {
        match self.handshake() {
            Ok(stream) => {
                self.generation += 1;
                let reader = match stream.try_clone() {
                    Ok(r) => r,
                    Err(e) => return self.lost(&format!("cannot clone the socket: {e}")),
                };
                let (tx, generation) = (self.incoming_tx.clone(), self.generation);
                let spawned = std::thread::Builder::new()
                    .name("xsched-agent-rx".into())
                    .spawn(move || read_loop(reader, generation, &tx));
                if let Err(e) = spawned {
                    return self.lost(&format!("cannot start the reader thread: {e}"));
                }
                self.writer = Some(stream);
                if self.warned {
                    tracing::warn!("xsched daemon at {} is back", self.socket.display());
                }
                self.warned = false;
                self.register_all();
            }
            Err(e) => self.lost(&e),
        }
    }

    fn handshake(&self) -> Result<UnixStream, String> {
        let s = client::connect(&self.socket, HANDSHAKE_TIMEOUT).map_err(|e| e.to_string())?;
        s.set_read_timeout(None).map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// The daemon is unreachable: run unscheduled, retry later, say so once.
    fn lost(&mut self, why: &str) {
        self.writer = None;
        self.next_attempt = Instant::now() + RECONNECT_EVERY;
        if !self.warned {
            tracing::warn!(
                "xsched daemon at {} unreachable ({why}); queues run unscheduled until it is back",
                self.socket.display()
            );
            self.warned = true;
        }
        self.resume_all();
    }

    fn resume_all(&self) {
        for (&id, q) in &self.queues {
            (q.control)(Operation::Resume(id));
            (q.control)(Operation::Unprotect(id));
        }
    }

    fn send(&mut self, msg: &ClientMsg) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        if let Err(e) = write_frame(w, msg) {
            self.lost(&e.to_string());
        }
    }

    fn send_stats(&mut self) {
        self.next_stats = Instant::now() + STATS_EVERY;
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
            self.send(m);
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
            } => {
                self.queues.insert(
                    queue,
                    Queue {
                        device,
                        hints,
                        control,
                        stats,
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
            SchedMsg::SetPolicy(_, name) => self.send(&ClientMsg::SetPolicy { name }),
            SchedMsg::Snapshot(reply) => {
                let _ = reply.send((Vec::new(), "global"));
            }
            SchedMsg::Shutdown => {}
        }
    }

    fn event(&mut self, event: Event) {
        let msg = match event {
            Event::Ready(q) => {
                self.set_ready(q, true);
                ClientMsg::Ready { queue: q.0 }
            }
            Event::Idle(q) => {
                self.set_ready(q, false);
                ClientMsg::Idle { queue: q.0 }
            }
            Event::Hint { queue, hint } => {
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
            Event::Unregister(q) => {
                self.queues.remove(&q);
                ClientMsg::Unregister { queue: q.0 }
            }
            Event::Register { .. } => return,
        };
        self.send(&msg);
    }

    fn set_ready(&mut self, queue: QueueId, ready: bool) {
        if let Some(q) = self.queues.get_mut(&queue) {
            q.ready = ready;
        }
    }

    fn incoming(&mut self, msg: Incoming) {
        match msg {
            Incoming::Msg(generation, _) | Incoming::Gone(generation)
                if generation != self.generation => {}
            Incoming::Msg(_, DaemonMsg::Suspend { queue }) => {
                self.apply(Operation::Suspend(QueueId(queue)))
            }
            Incoming::Msg(_, DaemonMsg::Resume { queue }) => {
                self.apply(Operation::Resume(QueueId(queue)))
            }
            Incoming::Msg(_, DaemonMsg::Protect { queue, protected }) => self.apply(if protected {
                Operation::Protect(QueueId(queue))
            } else {
                Operation::Unprotect(QueueId(queue))
            }),
            Incoming::Msg(_, DaemonMsg::Error { message }) => {
                tracing::warn!("xsched daemon: {message}");
            }
            Incoming::Msg(_, _) => {}
            Incoming::Gone(_) => self.lost("connection closed"),
        }
    }

    fn apply(&self, op: Operation) {
        if let Some(queue) = self.queues.get(&op.queue()) {
            (queue.control)(op);
        }
    }
}

fn read_loop(mut stream: UnixStream, generation: u64, tx: &Sender<Incoming>) {
    loop {
        match read_frame::<DaemonMsg>(&mut stream) {
            Ok(Some(msg)) => {
                if tx.send(Incoming::Msg(generation, msg)).is_err() {
                    return;
                }
            }
            Ok(None) | Err(_) => {
                let _ = tx.send(Incoming::Gone(generation));
                return;
            }
        }
    }
}
