//! Refill on the completing thread: the CPU device runs an XQueue's completion hook
//! on the worker that completed a synchronization point, so the refill launches from there and
//! the launcher thread is not woken; a backend whose hook fails leaves the refill to the
//! launcher thread, and neither path changes a command's result or order.

mod common;

use common::app_runtime;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xsched_backend_cpu::{CpuCommand, CpuDevice, CpuQueue};
use xsched_core::{Capabilities, DeviceId, LaunchConfig};
use xsched_runtime::{CommandError, Completion, CompletionHook, HwError, HwQueue, QueueOptions};

/// A CPU-device queue that records the name of every thread that launches on it, and can
/// refuse the completion hook (a backend whose hook fails).
struct Watched {
    inner: CpuQueue,
    refuse_hook: bool,
    launchers: Mutex<Vec<String>>,
}

impl Watched {
    fn new(dev: &CpuDevice, refuse_hook: bool) -> Arc<Watched> {
        Arc::new(Watched {
            inner: dev.create_queue(),
            refuse_hook,
            launchers: Mutex::new(Vec::new()),
        })
    }

    /// How many launches came from threads whose name starts with `prefix`.
    fn launches_from(&self, prefix: &str) -> usize {
        let names = self.launchers.lock().expect("launchers");
        names.iter().filter(|n| n.starts_with(prefix)).count()
    }
}

impl HwQueue for Watched {
    type Command = CpuCommand;
    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }
    fn device(&self) -> DeviceId {
        self.inner.device()
    }
    fn launch(&self, cmd: CpuCommand, done: Completion) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.launchers.lock().expect("launchers").push(name);
        self.inner.launch(cmd, done);
    }
    fn synchronize(&self) -> Result<(), HwError> {
        self.inner.synchronize()
    }
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        if self.refuse_hook {
            return Err(HwError::Backend(
                "the completion hook cannot be installed".into(),
            ));
        }
        self.inner.set_completion_hook(hook)
    }
    fn deactivate(&self) -> Result<(), HwError> {
        self.inner.deactivate()
    }
    fn reactivate(&self) -> Result<(), HwError> {
        self.inner.reactivate()
    }
    fn interrupt(&self) -> Result<(), HwError> {
        self.inner.interrupt()
    }
    fn restore(&self) -> Result<(), HwError> {
        self.inner.restore()
    }
}

/// Threshold 8, batch 4: a synchronization point every 4 commands.
fn options() -> QueueOptions {
    let config = LaunchConfig::new(8, 4)
        .expect("config")
        .with_inflight_budget(None);
    QueueOptions::default().with_config(config)
}

/// Submit `n` host commands that each take ~20 µs and record their index; wait for all of
/// them; the order they ran in. It waits by polling the queue's state, which wakes nobody: a
/// waiter asks the launcher to look at the hardware (and launch what that allows), which
/// would blur what launched where.
fn run_recorded(q: &xsched_runtime::XQueue<Watched>, n: u32) -> Vec<u32> {
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..n {
        let order = order.clone();
        q.submit(CpuCommand::host(move || {
            std::thread::sleep(Duration::from_micros(20));
            order.lock().expect("order").push(i);
        }))
        .expect("submit");
    }
    common::until("every command observed", || {
        q.query().completed == u64::from(n)
    });
    q.wait_all().expect("every command ran");
    order.lock().expect("order").clone()
}

#[test]
fn sync_points_refill_on_the_completing_thread_without_waking_the_launcher() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let hw = Watched::new(&dev, false);
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    let n = 200;
    let order = run_recorded(&q, n);
    assert_eq!(order, (0..n).collect::<Vec<_>>(), "in order, each once");
    let stats = q.refill_stats();
    assert!(stats.completion_hook, "the CPU device runs the hook");
    // ~50 synchronization points (every 4th command, and the last), none observed by the
    // launcher.
    assert!(
        stats.on_completing_thread >= 10,
        "refills on the worker: {stats:?}"
    );
    assert_eq!(stats.launcher_wakeups, 0, "launcher woken: {stats:?}");
    assert_eq!(
        hw.launches_from("xsched-launch-"),
        0,
        "no launch by the launcher"
    );
    assert!(
        hw.launches_from(&format!("xsched-cpu{}-w", dev.id().0)) >= 100,
        "the device's worker fed the queue"
    );
}

#[test]
fn suspend_and_resume_hold_with_refills_on_the_completing_thread() {
    let rt = app_runtime();
    let dev = CpuDevice::new(2).expect("device");
    let hw = Watched::new(&dev, false);
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    let order = Arc::new(Mutex::new(Vec::new()));
    let n = 300u32;
    for i in 0..n {
        let record = order.clone();
        q.submit(CpuCommand::host(move || {
            std::thread::sleep(Duration::from_micros(10));
            record.lock().expect("order").push(i);
        }))
        .expect("submit");
        if i % 50 == 25 {
            q.suspend().expect("suspend");
            std::thread::sleep(Duration::from_millis(2));
            let held = order.lock().expect("order").len();
            std::thread::sleep(Duration::from_millis(2));
            // Level 3 stops the device at the running command: nothing new starts while held.
            assert!(order.lock().expect("order").len() <= held + 1, "held");
            q.resume().expect("resume");
        }
    }
    q.wait_all().expect("every command ran");
    assert_eq!(*order.lock().expect("order"), (0..n).collect::<Vec<_>>());
    assert!(q.refill_stats().on_completing_thread > 0);
}

#[test]
fn a_refused_completion_hook_falls_back_to_the_launcher_with_the_same_results() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let hw = Watched::new(&dev, true);
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    let n = 200;
    let order = run_recorded(&q, n);
    assert_eq!(order, (0..n).collect::<Vec<_>>(), "in order, each once");
    let stats = q.refill_stats();
    assert!(!stats.completion_hook);
    assert_eq!(stats.on_completing_thread, 0);
    assert!(
        stats.launcher_wakeups >= 10,
        "the launcher refills: {stats:?}"
    );
    assert!(
        hw.launches_from("xsched-launch-") > 0,
        "the launcher fed the queue"
    );
    assert_eq!(hw.launches_from(&format!("xsched-cpu{}-w", dev.id().0)), 0);
}

#[test]
fn a_device_shut_down_gives_the_hook_back_and_every_command_still_settles() {
    let rt = app_runtime();
    let dev = CpuDevice::new(1).expect("device");
    let hw = Watched::new(&dev, false);
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    assert!(q.refill_stats().completion_hook);
    let handles: Vec<_> = (0..100)
        .map(|_| q.submit(common::spin(200)).expect("submit"))
        .collect();
    handles[5].wait().expect("ran before the shutdown");
    drop(dev);
    let mut failed_from = None;
    for (i, h) in handles.iter().enumerate() {
        let outcome = h
            .wait_timeout(Duration::from_secs(30))
            .expect("settles after the shutdown");
        match outcome {
            Ok(()) => assert!(failed_from.is_none(), "command {i} ran after one failed"),
            Err(CommandError::Failed(m)) => {
                assert!(m.contains("shut down"), "{m}");
                failed_from.get_or_insert(i);
            }
            Err(e) => panic!("command {i}: {e}"),
        }
    }
    assert!(failed_from.is_some(), "the shutdown failed the rest");
    assert!(!q.refill_stats().completion_hook, "the hook was given back");
}

/// A device queue smaller than the XQueue's threshold: launches wait for room on the device
/// while the worker refills at synchronization points; every command runs once, in order, and
/// nothing hangs (the refill never waits long for the queue's lock: the runtime's
/// `try_observe_and_refill`, whose give-up is tested in `machine.rs`).
#[test]
fn a_device_queue_smaller_than_the_threshold_runs_every_command_once_in_order() {
    let rt = app_runtime();
    let dev = CpuDevice::with_capacity(1, 2).expect("device");
    let hw = Watched::new(&dev, false);
    let config = LaunchConfig::new(64, 4)
        .expect("config")
        .with_inflight_budget(None);
    let q = rt
        .create_queue(hw.clone(), QueueOptions::default().with_config(config))
        .expect("queue");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let order = run_recorded(&q, 300);
        let _ = tx.send((order, q.refill_stats()));
    });
    let (order, stats) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("every command ran within a minute");
    assert_eq!(order, (0..300).collect::<Vec<_>>(), "in order, each once");
    assert!(stats.completion_hook, "{stats:?}");
}
