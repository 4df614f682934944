//! The engine's own promises in exact virtual time, whatever the policy: when a request
//! counts as done, and which random draws a workload sees.

use xsched_core::{Nanos, QueueHints};
use xsched_sim::profile;
use xsched_sim::spec::{
    Arrival, DeviceSpec, QueueMode, QueueSpec, SimSpec, StageSpec, WorkloadSpec,
};
use xsched_sim::{SimResult, simulate};

fn spec(devices: usize, own_streams: bool) -> SimSpec {
    let p = profile::by_key("gv100").expect("a built-in profile");
    SimSpec {
        seed: 3,
        duration: Nanos::from_ms(500),
        warmup: Nanos::ZERO,
        devices: (0..devices).map(|_| DeviceSpec::from_profile(&p)).collect(),
        queues: Vec::new(),
        workloads: Vec::new(),
        policy: None,
        sched_latency: Nanos::from_us(5),
        probe: None,
        own_streams,
    }
}

fn native_queue(s: &mut SimSpec, device: usize) -> usize {
    s.queues.push(QueueSpec {
        name: format!("q{}", s.queues.len()),
        device,
        mode: QueueMode::Native,
        hints: QueueHints::default(),
        declared_estimates: false,
    });
    s.queues.len() - 1
}

fn workload(s: &mut SimSpec, queue: usize, commands: u32, len: (u64, u64), arrival: Arrival) {
    s.workloads.push(WorkloadSpec {
        name: format!("w{}", s.workloads.len()),
        stages: vec![StageSpec {
            queue,
            commands,
            cmd_min: Nanos::from_us(len.0),
            cmd_max: Nanos::from_us(len.1),
        }],
        arrival,
        deadline: None,
        idempotent: false,
    });
}

fn mean_ms(r: &SimResult, w: usize) -> f64 {
    r.workloads[w].mean_us() / 1000.0
}

#[test]
fn a_request_is_done_when_its_last_command_is_even_with_more_queued_behind_it() {
    // Two requests of 100 x 10 us reach one native queue a nanosecond apart: the launcher
    // (4 us a command) still has the second's commands to launch when the first's last one
    // runs, and the first must not wait for the second to count as done.
    let mut s = spec(1, false);
    let q = native_queue(&mut s, 0);
    let once = Arrival::Uniform { rate_per_s: 1.0 };
    workload(&mut s, q, 100, (10, 10), once);
    workload(&mut s, q, 100, (10, 10), once);
    let r = simulate(s).expect("valid");
    let (first, second) = (mean_ms(&r, 0), mean_ms(&r, 1));
    assert!(
        first < 1.2 && second > 1.9,
        "first {first} ms, second {second} ms"
    );
}

#[test]
fn with_streams_of_their_own_a_workloads_requests_ignore_the_others() {
    // Workload 0 on device 0, a Poisson service; workload 1 on device 1 draws its own command
    // lengths. With one stream each, adding workload 1 changes nothing about workload 0.
    let run = |own: bool, with_other: bool| {
        let mut s = spec(2, own);
        let q0 = native_queue(&mut s, 0);
        workload(
            &mut s,
            q0,
            20,
            (50, 150),
            Arrival::Poisson { rate_per_s: 400.0 },
        );
        if with_other {
            let q1 = native_queue(&mut s, 1);
            workload(
                &mut s,
                q1,
                10,
                (10, 900),
                Arrival::Closed { think: Nanos::ZERO },
            );
        }
        let r = simulate(s).expect("valid");
        (r.workloads[0].completed, r.workloads[0].mean_us())
    };
    assert_eq!(run(true, false), run(true, true));
    assert_ne!(run(false, false), run(false, true));
}
