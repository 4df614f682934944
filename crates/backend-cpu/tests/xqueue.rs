//! XQueues over the real CPU device: ordering, waiting, cancel and drain, faults, levels, and
//! fixed-priority scheduling by the in-process scheduler thread.

mod common;

use common::{app_runtime, spin};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xsched_backend_cpu::{CpuCommand, CpuDevice, Kernel};
use xsched_core::{Capabilities, CoreError, DeviceId, Hint, LaunchConfig, Level};
use xsched_runtime::{
    CommandError, Completion, HwError, HwQueue, QueueOptions, RolloutMode, Runtime, RuntimeConfig,
    RuntimeError, WhoSchedules,
};

#[test]
fn submitted_commands_run_once_in_order_and_wait_works() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let config = LaunchConfig::new(4, 2).expect("config");
    let q = rt
        .create_queue(
            Arc::new(dev.create_queue()),
            QueueOptions::default().with_config(config),
        )
        .expect("queue");
    let order = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..200u32)
        .map(|i| {
            let order = order.clone();
            q.submit(CpuCommand::host(move || {
                order.lock().expect("order").push(i)
            }))
            .expect("submit")
        })
        .collect();
    handles[57].wait().expect("command 57");
    assert!(order.lock().expect("order").len() >= 58);
    q.wait_all().expect("all");
    assert!(handles.iter().all(|h| h.is_done()));
    assert_eq!(*order.lock().expect("order"), (0..200).collect::<Vec<_>>());
    let state = q.query();
    assert_eq!(
        (state.completed, state.pending, state.in_flight),
        (200, 0, 0)
    );
    assert_eq!(
        state.level,
        Level::Interrupt,
        "default: the backend's highest level"
    );
}

#[test]
fn suspended_queue_launches_nothing_and_cancel_reports_every_command() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    let ran = Arc::new(AtomicU32::new(0));
    q.suspend().expect("suspend");
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let ran = ran.clone();
            q.submit(CpuCommand::host(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }))
            .expect("submit")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(q.query().pending, 10);
    assert_eq!(q.cancel_pending().expect("cancel"), 10);
    for h in &handles {
        assert_eq!(h.wait(), Err(CommandError::Cancelled));
    }
    q.resume().expect("resume");
    let after = q.submit(spin(100)).expect("submit");
    after.wait().expect("runs after a cancel");
    q.close().expect("close");
}

#[test]
fn dropping_a_queue_drains_it_even_when_suspended() {
    let rt = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let dev = CpuDevice::new(1).expect("device");
    let ran = Arc::new(AtomicU32::new(0));
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    q.suspend().expect("suspend");
    for _ in 0..20 {
        let ran = ran.clone();
        q.submit(CpuCommand::host(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }))
        .expect("submit");
    }
    drop(q);
    assert_eq!(ran.load(Ordering::SeqCst), 20, "drop drains");
}

#[test]
fn a_panicking_kernel_fails_its_command_and_the_queue_keeps_working() {
    struct Boom;
    impl Kernel for Boom {
        fn tiles(&self) -> u32 {
            1
        }
        fn run_tile(&self, _: u32) {
            panic!("kernel bug");
        }
    }
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    let bad = q
        .submit(CpuCommand::Kernel(Arc::new(Boom)))
        .expect("submit");
    let good = q.submit(spin(50)).expect("submit");
    assert!(matches!(bad.wait(), Err(CommandError::Failed(m)) if m.contains("kernel bug")));
    good.wait().expect("the next command runs");
    assert!(q.close().is_err(), "close reports the failed command");
}

/// A Level-1-only hardware queue (runs host callbacks inline), to check level refusal.
struct Level1Only(Capabilities);

impl HwQueue for Level1Only {
    type Command = ();
    fn capabilities(&self) -> &Capabilities {
        &self.0
    }
    fn device(&self) -> DeviceId {
        DeviceId(9)
    }
    fn launch(&self, _: (), done: Completion) {
        done.complete(Ok(()));
    }
    fn synchronize(&self) -> Result<(), HwError> {
        Ok(())
    }
}

fn level1_caps() -> Capabilities {
    Capabilities {
        max_level: Level::Block,
        native_arbitration: "fifo".into(),
        preemption_unit: "none".into(),
        keeps_state: false,
        hardware_priority: false,
    }
}

/// A queue that records which threads were about to take its lock and whether it is
/// deactivated; at Level 2, its deactivation only lowers its priority where `lowers`.
struct Entered {
    caps: Capabilities,
    threads: Mutex<std::collections::HashSet<std::thread::ThreadId>>,
    lowers: bool,
    deactivated: std::sync::atomic::AtomicBool,
}

impl Entered {
    fn new(caps: Capabilities, lowers: bool) -> Entered {
        Entered {
            caps,
            threads: Mutex::default(),
            lowers,
            deactivated: Default::default(),
        }
    }
}

impl HwQueue for Entered {
    type Command = ();
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    fn device(&self) -> DeviceId {
        DeviceId(8)
    }
    fn launch(&self, _: (), done: Completion) {
        done.complete(Ok(()));
    }
    fn synchronize(&self) -> Result<(), HwError> {
        Ok(())
    }
    fn before_queue_lock(&self) {
        self.threads
            .lock()
            .expect("threads")
            .insert(std::thread::current().id());
    }
    fn deactivation_only_lowers_priority(&self) -> bool {
        self.lowers
    }
    fn deactivate(&self) -> Result<(), HwError> {
        self.deactivated.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn reactivate(&self) -> Result<(), HwError> {
        self.deactivated.store(false, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn the_backend_hears_every_application_thread_before_it_takes_the_queue_lock() {
    let rt = app_runtime();
    let hw = Arc::new(Entered::new(level1_caps(), false));
    let q = Arc::new(
        rt.create_queue(hw.clone(), QueueOptions::default())
            .expect("queue"),
    );
    let heard = |t: std::thread::ThreadId| hw.threads.lock().expect("threads").contains(&t);
    let me = std::thread::current().id();
    q.suspend().expect("suspend");
    assert!(heard(me), "the suspending thread");
    let submitter = {
        let q = q.clone();
        std::thread::spawn(move || {
            q.submit(()).expect("submit while suspended");
            std::thread::current().id()
        })
        .join()
        .expect("submitter")
    };
    assert!(heard(submitter), "a thread submitting to a suspended queue");
    let reconfigures = {
        let q = q.clone();
        std::thread::spawn(move || {
            q.set_config(LaunchConfig::new(2, 1).expect("config"))
                .expect("set_config");
            std::thread::current().id()
        })
        .join()
        .expect("reconfigurer")
    };
    assert!(heard(reconfigures), "a thread changing the launch config");
    q.resume().expect("resume");
    q.wait_all().expect("all ran");
}

#[test]
fn levels_the_backend_lacks_are_refused() {
    let rt = app_runtime();
    let hw = Arc::new(Level1Only(level1_caps()));
    let err = rt
        .create_queue(
            hw.clone(),
            QueueOptions::default().with_level(Level::Interrupt),
        )
        .expect_err("level 3 on a level-1 backend");
    assert!(matches!(
        err,
        RuntimeError::Core(CoreError::UnsupportedLevel { .. })
    ));
    let q = rt.create_queue(hw, QueueOptions::default()).expect("queue");
    assert_eq!(q.query().level, Level::Block);
    assert!(q.set_level(Level::Deactivate).is_err());
    for _ in 0..100 {
        q.submit(()).expect("submit");
    }
    q.wait_all().expect("inline completions");
    assert!(matches!(
        q.set_hint(Hint::Share(0)),
        Err(RuntimeError::Core(CoreError::InvalidHint(_)))
    ));
}

#[test]
fn level_cannot_change_while_suspended() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    q.set_level(Level::Deactivate).expect("running: allowed");
    q.suspend().expect("suspend");
    assert!(matches!(
        q.set_level(Level::Block),
        Err(RuntimeError::Suspended)
    ));
    q.resume().expect("resume");
    q.set_level(Level::Block).expect("allowed again");
}

#[test]
fn fixed_priority_runs_the_foreground_ahead_of_a_long_background() {
    for level in Level::ALL {
        let rt = Runtime::new(RuntimeConfig::default()).expect("hpf runtime");
        let dev = CpuDevice::new(1).expect("device");
        let options = QueueOptions::default().with_level(level);
        let bg = rt
            .create_queue(
                Arc::new(dev.create_queue()),
                options.with_hint(Hint::Priority(0)).expect("hint"),
            )
            .expect("bg");
        let fg = rt
            .create_queue(
                Arc::new(dev.create_queue()),
                options.with_hint(Hint::Priority(10)).expect("hint"),
            )
            .expect("fg");
        // 300 ms of background work, then one foreground command.
        for _ in 0..150 {
            bg.submit(spin(2000)).expect("bg submit");
        }
        std::thread::sleep(Duration::from_millis(20));
        fg.submit(spin(1000)).expect("fg").wait().expect("fg done");
        let bg_done = bg.query().completed;
        assert!(
            bg_done < 100,
            "level {level}: the foreground must not wait for the background (bg done: {bg_done})"
        );
        bg.cancel_pending().expect("cancel");
    }
}

#[test]
fn global_mode_without_a_daemon_runs_unscheduled_and_loses_nothing() {
    let socket = std::env::temp_dir().join(format!("xsched-absent-{}.sock", std::process::id()));
    let rt = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::Global,
        socket: Some(socket),
        ..RuntimeConfig::default()
    })
    .expect("global mode starts even without a daemon");
    let dev = CpuDevice::new(1).expect("device");
    let q = rt
        .create_queue(Arc::new(dev.create_queue()), QueueOptions::default())
        .expect("queue");
    let ran = Arc::new(AtomicU32::new(0));
    for _ in 0..50 {
        let ran = ran.clone();
        q.submit(CpuCommand::host(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }))
        .expect("submit");
    }
    q.wait_all().expect("all complete");
    assert_eq!(ran.load(Ordering::SeqCst), 50);
}

#[test]
fn slo_aware_in_process_refuses_queues_until_one_has_an_slo() {
    use xsched_core::Nanos;
    let runtime = Runtime::new(RuntimeConfig {
        policy: xsched_core::PolicySpec::registered("slo-aware"),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let device = CpuDevice::new(1).expect("device");
    let err = runtime
        .create_queue(Arc::new(device.create_queue()), QueueOptions::default())
        .err()
        .map(|e| xsched_runtime::chain_text(&e))
        .unwrap_or_default();
    assert!(
        err.contains("XSCHED_POLICY=slo-aware") && err.contains("XSCHED_SLO_US"),
        "{err}"
    );
    let hp = QueueOptions::default()
        .with_hint(Hint::Slo(Nanos::from_ms(5)))
        .expect("valid SLO");
    let _hp = runtime
        .create_queue(Arc::new(device.create_queue()), hp)
        .expect("the SLO queue");
    let _lp = runtime
        .create_queue(Arc::new(device.create_queue()), QueueOptions::default())
        .expect("now other queues are fine");
}

/// A low-priority queue beside a busy high-priority one, under fixed priority on one worker:
/// its 50 host commands in submission order, and whether all of them were done before the high
/// queue's last command.
fn low_beside_busy_high(low: QueueOptions) -> (Vec<u32>, bool) {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let high = rt
        .create_queue(
            Arc::new(dev.create_queue()),
            QueueOptions::default()
                .with_hint(Hint::Priority(5))
                .expect("a priority"),
        )
        .expect("high queue");
    let low = rt
        .create_queue(Arc::new(dev.create_queue()), low)
        .expect("low queue");
    // 40 x 5 ms: the high queue has work, and commands not yet launched, for 200 ms.
    let busy: Vec<_> = (0..40)
        .map(|_| high.submit(spin(5000)).expect("submit"))
        .collect();
    let order = Arc::new(Mutex::new(Vec::new()));
    let last = (0..50u32)
        .map(|i| {
            let order = order.clone();
            low.submit(CpuCommand::host(move || {
                order.lock().expect("order").push(i)
            }))
            .expect("submit")
        })
        .last()
        .expect("50 commands");
    last.wait().expect("the low queue's commands");
    let before_high = !busy.last().is_some_and(|h| h.is_done());
    high.wait_all().expect("the high queue's commands");
    let order = order.lock().expect("order").clone();
    (order, before_high)
}

/// `XSCHED_MODE=observe`: the queue goes through its XQueue but the device gets every command at
/// once, in order, and nobody holds it back (a cooperative queue in its place waits for the
/// high-priority one). One worker runs the device's one FIFO, so "before" is an order, not a
/// timing.
#[test]
fn observe_mode_changes_nothing_a_native_queue_would_get_and_cooperative_mode_is_held() {
    let (native, native_first) = low_beside_busy_high(QueueOptions::native());
    let (observed, observed_first) =
        low_beside_busy_high(RolloutMode::Observe.apply(QueueOptions::default()));
    let (held, held_first) =
        low_beside_busy_high(RolloutMode::Cooperative.apply(QueueOptions::default()));
    let expect: Vec<u32> = (0..50).collect();
    assert_eq!(native, expect);
    assert_eq!(observed, native, "same results, same order");
    assert_eq!(held, expect);
    assert!(
        native_first && observed_first,
        "natively and observed, nothing holds the queue"
    );
    assert!(
        !held_first,
        "a cooperative queue waits for the high-priority one"
    );
}

#[test]
fn a_held_queue_keeps_launching_only_where_asked_and_deactivation_only_lowers_priority() {
    for (lowers, yield_when_held) in [(true, true), (true, false), (false, true)] {
        let rt = app_runtime();
        let caps = Capabilities {
            max_level: Level::Deactivate,
            ..level1_caps()
        };
        let hw = Arc::new(Entered::new(caps, lowers));
        let options = QueueOptions {
            yield_when_held,
            ..QueueOptions::default()
        };
        let q = rt.create_queue(hw.clone(), options).expect("queue");
        q.suspend().expect("suspend");
        assert!(hw.deactivated.load(Ordering::SeqCst), "held at Level 2");
        let handles: Vec<_> = (0..5).map(|_| q.submit(()).expect("submit")).collect();
        if lowers && yield_when_held {
            for h in &handles {
                h.wait()
                    .expect("ran while held, on what the device left over");
            }
            assert!(hw.deactivated.load(Ordering::SeqCst), "still held");
        } else {
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(
                q.query().pending,
                5,
                "lowers {lowers}, yield {yield_when_held}"
            );
        }
        q.resume().expect("resume");
        q.wait_all().expect("all ran");
    }
}
