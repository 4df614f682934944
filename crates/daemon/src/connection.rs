//! One client connection: handshake, then frames in (reader: this thread) and operations out
//! (a writer thread fed by a channel, so the scheduler never blocks on a slow client).

use crate::peer::Peer;
use crate::server::Shared;
use crossbeam_channel::Receiver;
use std::os::unix::net::UnixStream;
use xsched_core::{DeviceId, Event, Operation};
use xsched_proto::{ClientMsg, DaemonMsg, TopRow, VERSION, read_frame, write_frame};
use xsched_runtime::scheduler::Control;

pub(crate) fn serve(shared: &Shared, conn: u64, stream: UnixStream) {
    let peer = match Peer::of(&stream) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("connection {conn}: no peer credentials: {e}");
            return;
        }
    };
    let (Ok(mut reader), Ok(writer)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let (out, outbox) = crossbeam_channel::unbounded();
    let writer_thread = std::thread::Builder::new()
        .name(format!("xsched-conn-{conn}-tx"))
        .spawn(move || write_loop(writer, &outbox));
    let Ok(writer_thread) = writer_thread else {
        return;
    };
    match read_frame::<ClientMsg>(&mut reader) {
        Ok(Some(ClientMsg::Hello { version })) if version == VERSION => {
            let _ = out.send(DaemonMsg::Welcome { version: VERSION });
            shared.registry.add_client(conn, peer.clone(), out.clone());
            tracing::info!("client {} ({}) connected", peer.pid, peer.name);
            read_loop(shared, conn, &peer, &mut reader);
            shared.registry.remove_client(conn);
            tracing::info!(
                "client {} ({}) gone; its queues released",
                peer.pid,
                peer.name
            );
        }
        Ok(Some(ClientMsg::Hello { version })) => {
            let _ = out.send(DaemonMsg::Error {
                message: format!(
                    "protocol version {version} unsupported; this daemon speaks {VERSION}"
                ),
            });
        }
        other => tracing::warn!("connection {conn}: bad handshake: {other:?}"),
    }
    drop(out);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = writer_thread.join();
}

fn write_loop(mut stream: UnixStream, outbox: &Receiver<DaemonMsg>) {
    for msg in outbox {
        if write_frame(&mut stream, &msg).is_err() {
            // The reader sees the broken connection and cleans up.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn read_loop(shared: &Shared, conn: u64, peer: &Peer, reader: &mut UnixStream) {
    loop {
        match read_frame::<ClientMsg>(reader) {
            Ok(Some(msg)) => handle(shared, conn, peer, msg),
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

fn reply(shared: &Shared, conn: u64, msg: DaemonMsg) {
    if let Some(out) = shared.registry.sender(conn) {
        let _ = out.send(msg);
    }
}

fn handle(shared: &Shared, conn: u64, peer: &Peer, msg: ClientMsg) {
    let reg = &shared.registry;
    let event = |local: u32, make: &dyn Fn(xsched_core::QueueId) -> Event| {
        if reg
            .with_queue(conn, local, |link| link.event(make(link.queue())))
            .is_none()
        {
            reply(
                shared,
                conn,
                DaemonMsg::Error {
                    message: format!("unknown queue {local}"),
                },
            );
        }
    };
    match msg {
        ClientMsg::Hello { .. } => reply(
            shared,
            conn,
            DaemonMsg::Error {
                message: "already said hello".into(),
            },
        ),
        ClientMsg::Register {
            queue,
            device,
            hints,
        } => {
            let id = reg.new_queue(conn, queue);
            let Some(out) = reg.sender(conn) else { return };
            let control: Control = Box::new(move |op| {
                let _ = out.send(match op {
                    Operation::Suspend(_) => DaemonMsg::Suspend { queue },
                    Operation::Resume(_) => DaemonMsg::Resume { queue },
                });
            });
            let link = shared.sched.register(id, DeviceId(device), hints, control);
            reg.add_queue(conn, queue, link);
        }
        ClientMsg::Ready { queue } => event(queue, &Event::Ready),
        ClientMsg::Idle { queue } => event(queue, &Event::Idle),
        ClientMsg::Hint { queue, hint } => event(queue, &|q| Event::Hint { queue: q, hint }),
        ClientMsg::Unregister { queue } => {
            reg.remove_queue(conn, queue);
        }
        ClientMsg::GetPolicy => {
            let name = shared.sched.snapshot().1.to_string();
            reply(shared, conn, DaemonMsg::Policy { name });
        }
        ClientMsg::SetPolicy { name } => {
            let answer = match shared.sched.set_policy(&name) {
                Ok(()) => DaemonMsg::Policy { name },
                Err(e) => DaemonMsg::Error {
                    message: e.to_string(),
                },
            };
            reply(shared, conn, answer);
        }
        ClientMsg::HintProcess { pid, queue, hint } => {
            let mut refused = false;
            let n = reg.for_process(pid, |owner, local, link| {
                if queue.is_some_and(|q| q != local) {
                    return;
                }
                if peer.may_act_on(owner) {
                    link.event(Event::Hint {
                        queue: link.queue(),
                        hint,
                    });
                } else {
                    refused = true;
                }
            });
            let answer = if refused {
                DaemonMsg::Error {
                    message: format!("process {pid} belongs to another user"),
                }
            } else if n == 0 {
                DaemonMsg::Error {
                    message: format!("process {pid} has no queues here"),
                }
            } else {
                DaemonMsg::Done
            };
            reply(shared, conn, answer);
        }
        ClientMsg::Top => {
            let (queues, _) = shared.sched.snapshot();
            let rows = queues
                .iter()
                .filter_map(|q| {
                    let (owner, local) = reg.owner(q.view.id)?;
                    Some(TopRow {
                        pid: owner.pid,
                        process: owner.name,
                        device: q.view.device.0,
                        queue: local,
                        hints: q.view.hints,
                        ready: q.view.ready,
                        suspended: q.suspended,
                    })
                })
                .collect();
            reply(shared, conn, DaemonMsg::Top { rows });
        }
    }
}
