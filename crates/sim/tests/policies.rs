//! The policies' defining properties in exact virtual time, on a simulated GV100: what each
//! promises a user, through the same launch machines and scheduler the runtime drives.

use xsched_core::{Hint, Nanos, QueueHints};
use xsched_sim::profile::{self, Profile};
use xsched_sim::spec::{
    Arrival, DeviceSpec, QueueMode, QueueSpec, SimSpec, StageSpec, WorkloadSpec,
};
use xsched_sim::{SimResult, simulate};

fn gv100() -> Profile {
    profile::by_key("gv100").expect("a built-in profile")
}

const WARMUP: Nanos = Nanos::from_ms(200);

/// A run on one GV100 of `queues` (name, hints, workload: commands per request, command
/// length, arrival) under `policy`.
fn run(policy: &str, queues: &[(&str, QueueHints, u32, Nanos, Arrival)]) -> SimResult {
    let p = gv100();
    let mut spec = SimSpec {
        seed: 7,
        duration: Nanos::from_ms(4000),
        warmup: WARMUP,
        devices: vec![DeviceSpec::from_profile(&p)],
        queues: Vec::new(),
        workloads: Vec::new(),
        policy: Some(policy.parse().expect("a registered policy")),
        sched_latency: Nanos::from_us(5),
        probe: None,
        own_streams: false,
    };
    for (i, (name, hints, commands, len, arrival)) in queues.iter().enumerate() {
        spec.queues.push(QueueSpec {
            name: (*name).into(),
            device: 0,
            mode: QueueMode::XQueue {
                config: p.launch_config(),
                level: p.max_level.value,
            },
            hints: *hints,
            declared_estimates: false,
        });
        spec.workloads.push(WorkloadSpec {
            name: (*name).into(),
            stages: vec![StageSpec {
                queue: i,
                commands: *commands,
                cmd_min: *len,
                cmd_max: *len,
            }],
            arrival: *arrival,
            deadline: None,
            idempotent: false,
        });
    }
    simulate(spec).expect("a valid spec")
}

fn share(w: u32) -> QueueHints {
    let mut h = QueueHints::default();
    h.apply(Hint::Share(w)).expect("positive share");
    h
}

const SATURATING: Arrival = Arrival::Closed { think: Nanos::ZERO };

fn device_split(r: &SimResult) -> f64 {
    let (a, b) = (r.queue_work[0].0 as f64, r.queue_work[1].0 as f64);
    a / (a + b)
}

#[test]
fn cfs_splits_device_time_by_weight() {
    let r = run(
        "cfs",
        &[
            ("heavy", share(3), 8, Nanos::from_us(500), SATURATING),
            ("light", share(1), 8, Nanos::from_us(500), SATURATING),
        ],
    );
    let split = device_split(&r);
    assert!((split - 0.75).abs() <= 0.03, "3:1 weights gave {split:.3}");
    let busy = (r.queue_work[0] + r.queue_work[1]).0 as f64 / r.window.0 as f64;
    assert!(
        busy > 0.95,
        "fair sharing costs little device time: {busy:.3}"
    );
}

#[test]
fn cfs_serves_an_intermittent_queue_at_once_where_bandwidth_makes_it_wait_a_slice() {
    let intermittent = Arrival::Uniform { rate_per_s: 20.0 };
    let queues = [
        (
            "interactive",
            share(1),
            2,
            Nanos::from_us(200),
            intermittent,
        ),
        ("batch-a", share(1), 8, Nanos::from_us(500), SATURATING),
        ("batch-b", share(1), 8, Nanos::from_us(500), SATURATING),
    ];
    let p99 = |policy: &str| {
        let r = run(policy, &queues);
        assert!(
            r.workloads[0].completed > 50,
            "{policy}: requests completed"
        );
        r.workloads[0].quantile_us(0.99)
    };
    let (cfs, bandwidth) = (p99("cfs"), p99("bandwidth"));
    // Alone the request takes 0.4 ms. Under bandwidth it waits for the running batch queue's
    // 5 ms slice; under cfs it preempts at once (Level 3 on the GV100: the interrupt, 32 us).
    assert!(cfs < 1_000.0, "cfs P99 {cfs:.0} us");
    assert!(
        bandwidth > 3.0 * cfs,
        "bandwidth {bandwidth:.0} us vs cfs {cfs:.0} us"
    );
}

#[test]
fn mlfq_keeps_short_work_ahead_of_a_long_job_without_hints_and_starves_nobody() {
    let queues = [
        (
            "short",
            QueueHints::default(),
            2,
            Nanos::from_us(200),
            Arrival::Uniform { rate_per_s: 50.0 },
        ),
        (
            "long",
            QueueHints::default(),
            8,
            Nanos::from_us(500),
            SATURATING,
        ),
    ];
    let mlfq = run("mlfq", &queues);
    let fcfs = run("fcfs", &queues);
    // Alone a short request takes 0.48 ms. Under mlfq it runs ahead of the long job, except
    // right after each boost (every second), when the long job is back on top for its first
    // allotment (10 ms of 1000: about 1 % of requests).
    let (m, f) = (
        mlfq.workloads[0].quantile_us(0.95),
        fcfs.workloads[0].quantile_us(0.95),
    );
    assert!(m < 500.0, "short requests under mlfq: P95 {m:.0} us");
    assert!(
        f > 2.0 * m,
        "fcfs (no priorities) P95 {f:.0} us vs mlfq {m:.0} us"
    );
    // The long job sinks but still gets the rest of the device.
    let long_share = mlfq.queue_work[1].0 as f64 / mlfq.window.0 as f64;
    assert!(long_share > 0.9, "long job's device share {long_share:.3}");
}

#[test]
fn a_quota_gives_the_lower_queue_its_share_of_each_window_and_the_top_queue_runs_freely() {
    let mut top = QueueHints::default();
    top.apply(Hint::Priority(1)).expect("a priority");
    let r = run(
        "quota:0.25",
        &[
            // A rare request: the device is the job's for the whole open part of each window.
            (
                "service",
                top,
                8,
                Nanos::from_us(500),
                Arrival::Uniform { rate_per_s: 1.0 },
            ),
            (
                "job",
                QueueHints::default(),
                8,
                Nanos::from_us(500),
                SATURATING,
            ),
        ],
    );
    let job = r.queue_work[1].0 as f64 / r.window.0 as f64;
    assert!((0.22..=0.30).contains(&job), "job's share {job}");
    assert!(r.workloads[0].completed >= 3);
}

#[test]
fn the_starvation_guard_gives_a_starved_queue_its_minimum_share_and_plain_hpf_does_not() {
    let mut top = QueueHints::default();
    top.apply(Hint::Priority(1)).expect("a priority");
    let queues = [
        ("high", top, 8, Nanos::from_us(500), SATURATING),
        (
            "low",
            QueueHints::default(),
            8,
            Nanos::from_us(500),
            SATURATING,
        ),
    ];
    let low_share = |r: &SimResult| r.queue_work[1].0 as f64 / r.window.0 as f64;
    let guarded = run("hpf:min-share=0.1", &queues);
    let plain = run("hpf", &queues);
    // About F of the device, as the policy's doc and docs/reference/policies.md say: it is let
    // run for F of each window; the device time that buys is what it launches then.
    assert!(
        (0.08..=0.13).contains(&low_share(&guarded)),
        "guarded low share {}",
        low_share(&guarded)
    );
    assert!(
        low_share(&plain) < 0.02,
        "plain hpf starves it: {}",
        low_share(&plain)
    );
    assert!(
        device_split(&guarded) >= 0.85,
        "the high queue keeps the rest"
    );
}
