//! Simulator speed: events per second on one core, for the fg-bg workload on a GV100 profile
//! (time-sliced device, fixed priority at Level 1, ~114 commands per request).

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xsched_core::{LaunchConfig, Level, Nanos, QueueHints};
use xsched_sim::profile;
use xsched_sim::simulate;
use xsched_sim::spec::{
    Arrival, DeviceSpec, QueueMode, QueueSpec, SimSpec, StageSpec, WorkloadSpec,
};

fn fg_bg_spec() -> SimSpec {
    let p = profile::by_key("gv100").expect("gv100 profile");
    let mode = QueueMode::XQueue {
        config: LaunchConfig::DEFAULT,
        level: Level::Block,
    };
    let queue = |name: &str, priority| QueueSpec {
        name: name.into(),
        device: 0,
        mode,
        hints: QueueHints {
            priority,
            ..QueueHints::default()
        },
        declared_estimates: false,
    };
    let stage = |queue| StageSpec {
        queue,
        commands: p.fg.commands.value,
        cmd_min: p.fg.cmd_min.value,
        cmd_max: p.fg.cmd_max.value,
    };
    let workload = |name: &str, queue, arrival| WorkloadSpec {
        name: name.into(),
        stages: vec![stage(queue)],
        arrival,
        deadline: None,
        idempotent: false,
    };
    SimSpec {
        seed: 1,
        duration: Nanos::from_ms(2_000),
        warmup: Nanos::ZERO,
        devices: vec![DeviceSpec::from_profile(&p)],
        queues: vec![queue("fg", 1), queue("bg", 0)],
        workloads: vec![
            workload(
                "fg",
                0,
                Arrival::Uniform {
                    rate_per_s: p.fg.rate_per_s.value,
                },
            ),
            workload("bg", 1, Arrival::Closed { think: Nanos::ZERO }),
        ],
        policy: Some(xsched_core::PolicySpec::registered("hpf")),
        sched_latency: Nanos::from_us(5),
        probe: None,
        own_streams: false,
    }
}

fn bench(c: &mut Criterion) {
    let events = simulate(fg_bg_spec()).expect("valid spec").events;
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(events));
    g.sample_size(10);
    g.bench_function("fg_bg_gv100_2s_virtual", |b| {
        b.iter(|| simulate(fg_bg_spec()).expect("valid spec").events)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
