//! One client connection: handshake, then frames in on this thread, each handled inline on the
//! shared scheduler; answers and operations go out through the connection's outbox.

use crate::core::Target;
use crate::outbox::Outbox;
use crate::peer::Peer;
use crate::server::Shared;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use xsched_core::{DeviceId, Event, QueueId, policy};
use xsched_proto::{ClientMsg, DaemonMsg, TopRow, VERSION, read_frame, write_frame};
use xsched_runtime::clock;

pub(crate) fn serve(shared: &Shared, conn: u64, stream: UnixStream) {
    let peer = match Peer::of(&stream) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("connection {conn}: no peer credentials: {e}");
            return;
        }
    };
    let Ok(mut reader) = stream.try_clone() else {
        return;
    };
    match read_frame::<ClientMsg>(&mut reader) {
        Ok(Some(ClientMsg::Hello { version })) if version == VERSION => {
            let mut welcome = &stream;
            if write_frame(&mut welcome, &DaemonMsg::Welcome { version: VERSION }).is_err() {
                return;
            }
            let outbox = match start_writer(conn, &stream) {
                Ok(o) => o,
                Err(e) => {
                    tracing::warn!("connection {conn}: cannot start its writer: {e}");
                    return;
                }
            };
            shared.registry.add_client(conn, peer.clone());
            tracing::info!("client {} ({}) connected", peer.pid, peer.name);
            read_loop(shared, conn, &peer, &outbox, &mut reader);
            outbox.close();
            let queues = shared.registry.remove_client(conn);
            let now = clock::now();
            shared.core.with(|d| {
                for q in queues {
                    let _ = d.event(now, Event::Unregister(q));
                }
            });
            tracing::info!(
                "client {} ({}) gone; its queues released",
                peer.pid,
                peer.name
            );
        }
        Ok(Some(ClientMsg::Hello { version })) => {
            let mut refusal = &stream;
            let _ = write_frame(
                &mut refusal,
                &DaemonMsg::Error {
                    message: format!(
                        "protocol version {version} unsupported; this daemon speaks {VERSION}"
                    ),
                },
            );
        }
        other => tracing::warn!("connection {conn}: bad handshake: {other:?}"),
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// The connection's outbox, with its writer thread started.
fn start_writer(conn: u64, stream: &UnixStream) -> std::io::Result<Arc<Outbox>> {
    let outbox = Arc::new(Outbox::new(stream.try_clone()?)?);
    let writer = outbox.clone();
    std::thread::Builder::new()
        .name(format!("xsched-out-{conn}"))
        .spawn(move || writer.run_writer())?;
    Ok(outbox)
}

fn read_loop(
    shared: &Shared,
    conn: u64,
    peer: &Peer,
    outbox: &Arc<Outbox>,
    reader: &mut UnixStream,
) {
    loop {
        match read_frame::<ClientMsg>(reader) {
            Ok(Some(msg)) => {
                if let Some(answer) = handle(shared, conn, peer, outbox, msg) {
                    outbox.send(&answer);
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(
                    "client {} ({}): {e}; closing its connection",
                    peer.pid,
                    peer.name
                );
                return;
            }
        }
    }
}

fn error(message: String) -> Option<DaemonMsg> {
    Some(DaemonMsg::Error { message })
}

/// Handle one message; the answer to send back, if any.
fn handle(
    shared: &Shared,
    conn: u64,
    peer: &Peer,
    outbox: &Arc<Outbox>,
    msg: ClientMsg,
) -> Option<DaemonMsg> {
    let reg = &shared.registry;
    let now = clock::now();
    let on_queue = |local: u32, make: &dyn Fn(QueueId) -> Event| match reg.queue(conn, local) {
        Some(q) => {
            let result = shared.core.with(|d| d.event(now, make(q)));
            result.err().and_then(|e| error(e.to_string()))
        }
        None => error(format!("unknown queue {local}")),
    };
    match msg {
        ClientMsg::Hello { .. } => error("already said hello".into()),
        ClientMsg::Register {
            queue,
            device,
            hints,
        } => {
            let hints = match hints.to_core() {
                Ok(h) => h,
                Err(e) => return error(format!("queue {queue}: {e}")),
            };
            let (id, old) = reg.add_queue(conn, queue);
            let target = Target {
                outbox: outbox.clone(),
                queue,
            };
            let result = shared.core.with(|d| {
                if let Some(old) = old {
                    let _ = d.event(now, Event::Unregister(old));
                }
                d.register(now, id, DeviceId(device), hints, target)
            });
            result.err().and_then(|e| error(e.to_string()))
        }
        ClientMsg::Ready { queue } => on_queue(queue, &Event::Ready),
        ClientMsg::Idle { queue } => on_queue(queue, &Event::Idle),
        ClientMsg::Hint { queue, hint } => on_queue(queue, &|q| Event::Hint {
            queue: q,
            hint: hint.into(),
        }),
        ClientMsg::Unregister { queue } => match reg.remove_queue(conn, queue) {
            Some(q) => {
                let result = shared.core.with(|d| d.event(now, Event::Unregister(q)));
                result.err().and_then(|e| error(e.to_string()))
            }
            None => error(format!("unknown queue {queue}")),
        },
        ClientMsg::GetPolicy => Some(DaemonMsg::Policy {
            name: shared.core.with(|d| d.policy_name()).to_string(),
        }),
        ClientMsg::SetPolicy { name } => {
            match policy::by_name(&name).and_then(|p| shared.core.with(|d| d.set_policy(p))) {
                Ok(()) => Some(DaemonMsg::Policy { name }),
                Err(e) => error(e.to_string()),
            }
        }
        ClientMsg::HintProcess { pid, queue, hint } => {
            let targets: Vec<_> = reg
                .of_process(pid)
                .into_iter()
                .filter(|(_, local, _)| queue.is_none_or(|q| q == *local))
                .collect();
            if targets.is_empty() {
                return error(format!("process {pid} has no such queues here"));
            }
            if targets.iter().any(|(owner, _, _)| !peer.may_act_on(owner)) {
                return error(format!("process {pid} belongs to another user"));
            }
            let result = shared.core.with(|d| {
                targets.iter().try_for_each(|&(_, _, q)| {
                    d.event(
                        now,
                        Event::Hint {
                            queue: q,
                            hint: hint.into(),
                        },
                    )
                })
            });
            match result {
                Ok(()) => Some(DaemonMsg::Done),
                Err(e) => error(e.to_string()),
            }
        }
        ClientMsg::Stats { queue, stats } => {
            if reg.set_stats(conn, queue, stats) {
                None
            } else {
                error(format!("unknown queue {queue}"))
            }
        }
        ClientMsg::Top => {
            let (queues, _) = shared.core.snapshot();
            let rows = queues
                .iter()
                .filter_map(|q| {
                    let (owner, local, stats) = reg.owner(q.view.id)?;
                    Some(TopRow {
                        pid: owner.pid,
                        process: owner.name,
                        device: q.view.device.0,
                        queue: local,
                        hints: q.view.hints.into(),
                        ready: q.view.ready,
                        suspended: q.suspended,
                        stats,
                    })
                })
                .collect();
            Some(DaemonMsg::Top { rows })
        }
    }
}
