//! The CPU device on its own (no XQueue): order, Level 2 holds, Level 3 stops and restores
//! without redoing work, panics fail one command only.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xsched_backend_cpu::kernels::{MatMul, Saxpy, Spin};
use xsched_backend_cpu::{CpuCommand, CpuDevice, Kernel};
use xsched_core::CommandId;
use xsched_runtime::{CommandError, Completion, CompletionSink, HwQueue};

/// Records every completion, in order.
#[derive(Default)]
struct Log(Mutex<Vec<(u64, Result<(), CommandError>)>>);

impl CompletionSink for Log {
    fn complete(&self, cmd: CommandId, _sync: bool, result: Result<(), CommandError>) {
        self.0.lock().expect("log").push((cmd.0, result));
    }
}

impl Log {
    fn len(&self) -> usize {
        self.0.lock().expect("log").len()
    }
    fn wait_for(&self, n: usize) {
        let start = Instant::now();
        while self.len() < n {
            assert!(start.elapsed() < Duration::from_secs(30), "timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn token(log: &Arc<Log>, id: u64) -> Completion {
    Completion::new(log.clone(), CommandId(id), false)
}

/// Wraps a kernel, counting how often each tile ran.
struct Counted<K> {
    inner: K,
    runs: Vec<AtomicU32>,
}

impl<K: Kernel> Counted<K> {
    fn new(inner: K) -> Counted<K> {
        let runs = (0..inner.tiles()).map(|_| AtomicU32::new(0)).collect();
        Counted { inner, runs }
    }
    fn total(&self) -> u32 {
        self.runs.iter().map(|r| r.load(Ordering::SeqCst)).sum()
    }
}

impl<K: Kernel> Kernel for Counted<K> {
    fn tiles(&self) -> u32 {
        self.inner.tiles()
    }
    fn run_tile(&self, tile: u32) {
        self.inner.run_tile(tile);
        self.runs[tile as usize].fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn commands_of_a_queue_complete_in_order() {
    let dev = CpuDevice::new(2).expect("device");
    let q = dev.create_queue();
    let log = Arc::new(Log::default());
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..50u64 {
        let order = order.clone();
        q.launch(
            CpuCommand::host(move || order.lock().expect("order").push(i)),
            token(&log, i),
        );
    }
    q.synchronize().expect("sync");
    assert_eq!(*order.lock().expect("order"), (0..50).collect::<Vec<_>>());
    let done: Vec<u64> = log.0.lock().expect("log").iter().map(|(i, _)| *i).collect();
    assert_eq!(done, (0..50).collect::<Vec<_>>());
}

/// The value of `count` once it has not changed for 20 ms (at most 2 s).
fn settled(count: impl Fn() -> u32) -> u32 {
    let mut last = count();
    let mut stable_since = std::time::Instant::now();
    let start = stable_since;
    while stable_since.elapsed() < Duration::from_millis(20)
        && start.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(1));
        let now = count();
        if now != last {
            last = now;
            stable_since = std::time::Instant::now();
        }
    }
    last
}

#[test]
fn interrupted_kernels_resume_without_redoing_work() {
    for workers in [1, 2] {
        let dev = CpuDevice::new(workers).expect("device");
        let q = dev.create_queue();
        let log = Arc::new(Log::default());
        // Not idempotent: a tile run twice would change y.
        let saxpy = Arc::new(Counted::new(Saxpy::new(1 << 20, 1 << 10, 0.5, 7)));
        let matmul = Arc::new(Counted::new(MatMul::new(96, 2, 3)));
        q.launch(CpuCommand::Kernel(saxpy.clone()), token(&log, 0));
        q.launch(CpuCommand::Kernel(matmul.clone()), token(&log, 1));
        let mut interrupts = 0;
        while log.len() < 2 {
            q.interrupt().expect("interrupt");
            // Stopped: once the tiles in progress end, no more run until restore. Wait for
            // that (a worker the OS descheduled mid-tile may finish it late on a loaded
            // machine), then check nothing more runs.
            let before = settled(|| saxpy.total() + matmul.total());
            std::thread::sleep(Duration::from_millis(5));
            assert_eq!(
                saxpy.total() + matmul.total(),
                before,
                "ran while interrupted"
            );
            q.restore().expect("restore");
            interrupts += 1;
            std::thread::sleep(Duration::from_micros(300));
        }
        assert!(interrupts >= 2, "the kernels should have been interrupted");
        assert!(saxpy.runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));
        assert!(matmul.runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));

        let want_saxpy = Saxpy::new(1 << 20, 1 << 10, 0.5, 7);
        let want_matmul = MatMul::new(96, 2, 3);
        for t in 0..want_saxpy.tiles() {
            want_saxpy.run_tile(t);
        }
        for t in 0..want_matmul.tiles() {
            want_matmul.run_tile(t);
        }
        assert_eq!(saxpy.inner.result(), want_saxpy.result());
        assert_eq!(matmul.inner.result(), want_matmul.result());
        assert!(log.0.lock().expect("log").iter().all(|(_, r)| r.is_ok()));
    }
}

#[test]
fn deactivated_queue_holds_its_commands_while_others_run() {
    let dev = CpuDevice::new(1).expect("device");
    let (a, b) = (dev.create_queue(), dev.create_queue());
    let log = Arc::new(Log::default());
    let ran = Arc::new(AtomicU32::new(0));
    let (started_tx, started) = crossbeam_channel::bounded(1);
    a.launch(
        CpuCommand::host(move || {
            let _ = started_tx.send(());
            std::thread::sleep(Duration::from_millis(20));
        }),
        token(&log, 0),
    );
    for i in 1..=3 {
        let ran = ran.clone();
        a.launch(
            CpuCommand::host(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }),
            token(&log, i),
        );
    }
    started.recv().expect("first command started");
    a.deactivate().expect("deactivate");
    // b's command was launched last but runs first: a's queued commands are held.
    b.launch(CpuCommand::host(|| ()), token(&log, 100));
    log.wait_for(2);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "held commands must not start"
    );
    assert!(
        a.synchronize().is_err(),
        "synchronizing a held queue would never return: refused"
    );
    a.reactivate().expect("reactivate");
    a.synchronize().expect("sync");
    assert_eq!(ran.load(Ordering::SeqCst), 3);
}

#[test]
fn a_panicking_kernel_fails_only_its_command() {
    struct Boom;
    impl Kernel for Boom {
        fn tiles(&self) -> u32 {
            4
        }
        fn run_tile(&self, tile: u32) {
            assert!(tile != 2, "tile 2 is broken");
        }
    }
    let dev = CpuDevice::new(2).expect("device");
    let q = dev.create_queue();
    let log = Arc::new(Log::default());
    q.launch(CpuCommand::Kernel(Arc::new(Boom)), token(&log, 0));
    q.launch(CpuCommand::host(|| panic!("host boom")), token(&log, 1));
    q.launch(CpuCommand::host(|| ()), token(&log, 2));
    q.synchronize().expect("sync");
    let got = log.0.lock().expect("log").clone();
    assert!(matches!(&got[0].1, Err(CommandError::Failed(m)) if m.contains("tile 2 is broken")));
    assert!(matches!(&got[1].1, Err(CommandError::Failed(m)) if m.contains("host boom")));
    assert_eq!(got[2], (2, Ok(())));
}

#[test]
fn dropping_the_device_fails_what_it_still_held() {
    let log = Arc::new(Log::default());
    let dev = CpuDevice::new(1).expect("device");
    let q = dev.create_queue();
    q.launch(
        CpuCommand::Kernel(Arc::new(Spin::new(Duration::from_millis(5)))),
        token(&log, 0),
    );
    q.deactivate().expect("deactivate");
    q.launch(CpuCommand::host(|| ()), token(&log, 1));
    drop(dev);
    log.wait_for(2);
    let got = log.0.lock().expect("log").clone();
    assert!(got.iter().any(|(i, r)| *i == 1 && r.is_err()));
    let late = Arc::new(Log::default());
    q.launch(CpuCommand::host(|| ()), token(&late, 9));
    assert!(late.0.lock().expect("log")[0].1.is_err());
}

#[test]
fn dropped_queues_leave_the_device_after_their_work() {
    let dev = CpuDevice::new(1).expect("device");
    for _ in 0..100 {
        drop(dev.create_queue());
    }
    assert_eq!(dev.queues(), 0, "idle queues leave at once");
    let log = Arc::new(Log::default());
    let q = dev.create_queue();
    q.launch(
        CpuCommand::Kernel(Arc::new(Spin::new(Duration::from_millis(5)))),
        token(&log, 0),
    );
    q.deactivate().expect("deactivate");
    q.launch(CpuCommand::host(|| ()), token(&log, 1));
    drop(q);
    log.wait_for(2);
    assert!(
        log.0.lock().expect("log").iter().all(|(_, r)| r.is_ok()),
        "held work still ran"
    );
    let start = Instant::now();
    while dev.queues() > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "gate never left");
        std::thread::sleep(Duration::from_millis(1));
    }
}
