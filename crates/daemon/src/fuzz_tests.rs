//! A stateful fuzz test of the daemon: random interleavings of every client message (valid and
//! not) from several clients of different users, with disconnects and reconnects, handled by the
//! daemon's own connection code on its own scheduler and registry. After every step the
//! daemon's invariants are checked:
//!
//! - the registry and the scheduler agree on the queues, each with exactly one owner;
//! - no client has more queues than the limit, and no unprivileged client sets a priority
//!   outside its range;
//! - only an authorized client changes the policy, and a hint or a mode switch on another
//!   user's process from an unauthorized client is refused and changes nothing;
//! - `Top` shows an unprivileged client only its own user's queues;
//! - every operation a client receives is for a queue it registered;
//! - when every client is gone, so is every queue.
//!
//! Nothing a client sends may panic the daemon (proptest reports a panic as a failure).
//!
//! `mode set`'s authority (the same user or root) is also checked step by step, from a user who
//! may not see the target, one who may see it but not act on it, the owner and root.

use crate::admission::ConnectionLimiter;
use crate::config::{AuthorityConfig, DaemonConfig};
use crate::connection::Session;
use crate::outbox::Outbox;
use crate::peer::Peer;
use crate::shared::DaemonState;
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use xsched_core::PolicySpec;
use xsched_proto::{
    ClientMsg, DaemonMsg, QueueStats, WireHint, WireHints, WireRolloutMode, read_frame,
};

/// The clients: (pid, uid). Root is the daemon's admin here (the tests run as root or not:
/// uid 0 is an admin either way); 1000 has two processes; 1001 one.
const CLIENTS: [(u32, u32); 4] = [(100, 0), (101, 1000), (102, 1000), (103, 1001)];
const MAX_QUEUES: usize = 6;

#[derive(Clone, Debug)]
enum Step {
    Send(usize, ClientMsg),
    Reconnect(usize),
}

fn hint() -> impl Strategy<Value = WireHint> {
    prop_oneof![
        (-300i32..300).prop_map(WireHint::Priority),
        (0u32..5).prop_map(WireHint::Share),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(99_999),
            Just(5_000_000),
            Just(u64::MAX)
        ]
        .prop_map(WireHint::TimeSliceNs),
        (0u64..10_000_000).prop_map(WireHint::LaxityNs),
        (0u64..10_000_000).prop_map(WireHint::DeadlineNs),
        (0u64..3).prop_map(WireHint::SloNs),
    ]
}

fn hints() -> impl Strategy<Value = WireHints> {
    (
        -300i32..300,
        0u32..4,
        proptest::option::of(prop_oneof![Just(0u64), Just(50), Just(1_000_000)]),
        proptest::option::of(0u64..1000),
        proptest::option::of(prop_oneof![Just(0u64), Just(5_000_000)]),
    )
        .prop_map(
            |(priority, share, time_slice_ns, laxity_ns, slo_ns)| WireHints {
                priority,
                share,
                time_slice_ns,
                laxity_ns,
                deadline_ns: None,
                slo_ns,
            },
        )
}

fn message() -> impl Strategy<Value = ClientMsg> {
    let queue = 0u32..9;
    let policies = prop_oneof![
        Just("hpf"),
        Just("fcfs"),
        Just("bandwidth"),
        Just("cfs"),
        Just("slo-aware"),
        Just("kedf:2"),
        Just("no-such-policy"),
    ];
    prop_oneof![
        (0u16..4).prop_map(|version| ClientMsg::Hello { version }),
        (queue.clone(), 0u16..3, hints()).prop_map(|(queue, device, hints)| {
            ClientMsg::Register {
                queue,
                device,
                hints,
            }
        }),
        queue.clone().prop_map(|queue| ClientMsg::Ready { queue }),
        queue.clone().prop_map(|queue| ClientMsg::Idle { queue }),
        (queue.clone(), hint()).prop_map(|(queue, hint)| ClientMsg::Hint { queue, hint }),
        queue
            .clone()
            .prop_map(|queue| ClientMsg::Unregister { queue }),
        Just(ClientMsg::GetPolicy),
        policies.prop_map(|n| ClientMsg::SetPolicy { name: n.into() }),
        (99u32..105, proptest::option::of(queue.clone()), hint())
            .prop_map(|(pid, queue, hint)| ClientMsg::HintProcess { pid, queue, hint }),
        (0u32..40).prop_map(|from| ClientMsg::Top { from }),
        (queue, 0u64..100).prop_map(|(queue, completed)| ClientMsg::Stats {
            queue,
            stats: QueueStats {
                in_flight: 1,
                completed,
                recent_p99_us: 1.0,
                ..QueueStats::default()
            },
        }),
        any::<u32>().prop_map(|seq| ClientMsg::Ping { seq }),
        (99u32..105, proptest::option::of(0u32..4), 0usize..3).prop_map(|(pid, queue, m)| {
            let mode = [
                WireRolloutMode::Observe,
                WireRolloutMode::Cooperative,
                WireRolloutMode::Preemptive,
            ][m];
            ClientMsg::SetMode { pid, queue, mode }
        }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        20 => (0..CLIENTS.len(), message()).prop_map(|(c, m)| Step::Send(c, m)),
        1 => (0..CLIENTS.len()).prop_map(Step::Reconnect),
    ]
}

/// One client: its session, the other end of its socket, what it ever registered.
pub(crate) struct Client<'a> {
    pub(crate) session: Option<Session<'a>>,
    far_end: UnixStream,
    registered: BTreeSet<u32>,
}

fn connect<'a>(
    shared: &'a DaemonState,
    admission: &Arc<ConnectionLimiter>,
    conn: u64,
    c: usize,
) -> Client<'a> {
    let (pid, uid) = CLIENTS[c];
    let peer = Peer {
        pid,
        uid,
        gids: vec![uid],
        name: format!("client{c}"),
    };
    join(shared, admission, conn, peer)
}

/// `peer` past its handshake on connection `conn`.
pub(crate) fn join<'a>(
    shared: &'a DaemonState,
    admission: &Arc<ConnectionLimiter>,
    conn: u64,
    peer: Peer,
) -> Client<'a> {
    let (near, far_end) = UnixStream::pair().expect("socket pair");
    far_end.set_nonblocking(true).expect("nonblocking");
    let admitted = admission
        .admit(conn, peer.uid, &near)
        .expect("within limits");
    admitted.shook_hands();
    let outbox = Arc::new(Outbox::new(near).expect("outbox"));
    Client {
        session: Some(Session::start(shared, conn, peer, outbox, admitted)),
        far_end,
        registered: BTreeSet::new(),
    }
}

/// Every frame waiting at a client's end.
pub(crate) fn drain(client: &Client<'_>) -> Vec<DaemonMsg> {
    let mut got = Vec::new();
    while let Ok(Some(m)) = read_frame::<DaemonMsg>(&mut &client.far_end) {
        got.push(m);
    }
    got
}

/// The daemon's queues as (owner uid, owner pid, local id, priority), checked to agree with
/// the registry.
fn queues(shared: &DaemonState) -> Result<Vec<(u32, u32, u32, i32)>, String> {
    let n = shared.registry.check().map_err(|e| e.to_string())?;
    let (snapshot, _) = shared.core.snapshot();
    if snapshot.len() != n {
        return Err(format!(
            "the scheduler has {} queues, the registry {n}",
            snapshot.len()
        ));
    }
    snapshot
        .iter()
        .map(|q| {
            let (owner, local, _) = shared
                .registry
                .owner(q.view.id)
                .ok_or_else(|| format!("scheduled queue {:?} has no owner", q.view.id))?;
            Ok((owner.uid, owner.pid, local, q.view.hints.priority))
        })
        .collect()
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let config = DaemonConfig {
        limits: crate::config::Limits {
            max_queues_per_client: MAX_QUEUES,
            ..Default::default()
        },
        ..DaemonConfig::default()
    };
    let shared = DaemonState::new(PolicySpec::default().build(), &config).expect("shared");
    let admission = shared.admission.clone();
    let mut next_conn = 0u64;
    let mut clients: Vec<Client<'_>> = (0..CLIENTS.len())
        .map(|c| {
            next_conn += 1;
            connect(&shared, &admission, next_conn, c)
        })
        .collect();
    for step in steps {
        let policy_before = shared.core.with(|d| d.policy_name());
        let before = queues(&shared).map_err(TestCaseError::fail)?;
        let (c, msg) = match step {
            Step::Reconnect(c) => {
                clients[c].session = None;
                next_conn += 1;
                clients[c] = connect(&shared, &admission, next_conn, c);
                continue;
            }
            Step::Send(c, msg) => (c, msg),
        };
        let (pid, uid) = CLIENTS[c];
        let admin = uid == 0;
        if let ClientMsg::Register { queue, .. } = msg {
            clients[c].registered.insert(queue);
        }
        let session = clients[c].session.as_ref().expect("connected");
        let answer = session.handle(msg.clone());
        let after = queues(&shared).map_err(TestCaseError::fail)?;

        // Limits, and the priority range of what an unprivileged client set.
        let mut per_conn: HashMap<u32, usize> = HashMap::new();
        for q in &after {
            let &(_, owner_pid, _, priority) = q;
            *per_conn.entry(owner_pid).or_default() += 1;
            prop_assert!(
                admin || before.contains(q) || (-100..=100).contains(&priority),
                "{:?} from uid {uid} set a priority of {priority}",
                msg
            );
        }
        prop_assert!(per_conn.values().all(|&n| n <= MAX_QUEUES));

        // Authority.
        let policy_after = shared.core.with(|d| d.policy_name());
        if !admin {
            prop_assert_eq!(policy_before, policy_after, "{:?} changed the policy", msg);
        }
        let others = |target: &u32| {
            let target_uid = CLIENTS.iter().find(|(p, _)| p == target).map(|&(_, u)| u);
            !admin && target_uid.is_some_and(|u| u != uid)
        };
        let refused = matches!(answer, Some(DaemonMsg::Error { .. }));
        if let ClientMsg::HintProcess { pid: target, .. } = &msg
            && others(target)
        {
            prop_assert!(refused, "{:?} was not refused: {:?}", msg, answer);
            prop_assert_eq!(&before, &after, "a refused hint changed queues");
        }
        let mode_of_others =
            matches!(&msg, ClientMsg::SetMode { pid: target, .. } if others(target));
        if mode_of_others {
            prop_assert!(refused, "{:?} was not refused: {:?}", msg, answer);
        }
        if let Some(DaemonMsg::Top { rows, .. }) = &answer {
            for r in rows {
                let row_uid = CLIENTS.iter().find(|(p, _)| *p == r.pid).map(|&(_, u)| u);
                prop_assert!(
                    admin || row_uid == Some(uid),
                    "pid {pid} (uid {uid}) was shown pid {}'s queue",
                    r.pid
                );
            }
        }

        // Operations only for the client's own queues; a refused mode switch reaches nobody.
        for client in &clients {
            for m in drain(client) {
                let queue = match m {
                    DaemonMsg::Suspend { queue }
                    | DaemonMsg::Resume { queue }
                    | DaemonMsg::Protect { queue, .. } => queue,
                    DaemonMsg::SetMode { queue, .. } => {
                        prop_assert!(!mode_of_others, "{:?} was refused yet sent", msg);
                        queue
                    }
                    _ => continue,
                };
                prop_assert!(
                    client.registered.contains(&queue),
                    "an operation for queue {queue}, which this client never registered"
                );
            }
        }
    }
    clients.clear();
    let left = queues(&shared).map_err(TestCaseError::fail)?;
    prop_assert!(left.is_empty(), "queues outlived their clients: {left:?}");
    prop_assert_eq!(admission.counted(), (0, 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_sequence_of_messages_breaks_the_daemons_invariants(
        steps in proptest::collection::vec(step(), 1..250)
    ) {
        run(steps)?;
    }
}

/// `xsched mode set` on another process: the owner's user (from another process) and root
/// switch it, and the switch reaches the queue's client; another user is refused, whether it
/// may see the process (`see_all`) or not, and nothing reaches the client.
#[test]
fn only_the_same_user_or_root_switches_a_process_mode() {
    // `see_all` names the group root (gid 0, on every system); `hint_others` nobody. The uids
    // are none that runs tests, which would be the daemon's own user and so an admin.
    let config = DaemonConfig {
        authority: AuthorityConfig {
            see_all: vec!["@root".into()],
            ..AuthorityConfig::default()
        },
        ..DaemonConfig::default()
    };
    let shared = DaemonState::new(PolicySpec::default().build(), &config).expect("shared");
    let admission = shared.admission.clone();
    let (owner_uid, stranger_uid, watcher_uid) = (2_000_001, 2_000_002, 2_000_003);
    let peer = |pid: u32, uid: u32, gids: Vec<u32>| Peer {
        pid,
        uid,
        gids,
        name: format!("p{pid}"),
    };
    let target = join(
        &shared,
        &admission,
        1,
        peer(201, owner_uid, vec![owner_uid]),
    );
    let sibling = join(
        &shared,
        &admission,
        2,
        peer(202, owner_uid, vec![owner_uid]),
    );
    let stranger = join(
        &shared,
        &admission,
        3,
        peer(203, stranger_uid, vec![stranger_uid]),
    );
    let watcher = join(
        &shared,
        &admission,
        4,
        peer(204, watcher_uid, vec![watcher_uid, 0]),
    );
    let root = join(&shared, &admission, 5, peer(205, 0, vec![0]));
    let send = |client: &Client<'_>, msg: ClientMsg| {
        client.session.as_ref().expect("connected").handle(msg)
    };
    let register = ClientMsg::Register {
        queue: 7,
        device: 0,
        hints: WireHints::default(),
    };
    assert_eq!(send(&target, register), None, "registered");
    let switch = |mode| ClientMsg::SetMode {
        pid: 201,
        queue: None,
        mode,
    };
    let switches = |client: &Client<'_>| -> Vec<DaemonMsg> {
        drain(client)
            .into_iter()
            .filter(|m| matches!(m, DaemonMsg::SetMode { .. }))
            .collect()
    };
    let _ = switches(&target);

    for (who, client, why) in [
        (
            "a user who may not see it",
            &stranger,
            "has no such queues you may see",
        ),
        (
            "a user who may see it",
            &watcher,
            "belongs to uid 2000001, and uid 2000003 is not root",
        ),
    ] {
        match send(client, switch(WireRolloutMode::Observe)) {
            Some(DaemonMsg::Error { message }) => assert!(message.contains(why), "{message}"),
            other => panic!("{who} switched another user's process: {other:?}"),
        }
        assert_eq!(
            switches(&target),
            [],
            "{who}'s refused switch reached the client"
        );
    }

    for (who, client, mode) in [
        ("the same user", &sibling, WireRolloutMode::Observe),
        ("root", &root, WireRolloutMode::Preemptive),
    ] {
        assert_eq!(send(client, switch(mode)), Some(DaemonMsg::Done), "{who}");
        assert_eq!(
            switches(&target),
            [DaemonMsg::SetMode { queue: 7, mode }],
            "{who}'s switch reaches the queue's client"
        );
    }
}
