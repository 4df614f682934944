//! Refill on the stream's watcher thread, on the fake driver (or a real GPU with
//! `XSCHED_CUDA_REAL=1`): the watcher runs an XQueue's completion hook after reporting a
//! synchronization point, so the refill launches from there and the launcher thread is not
//! woken for it; a command that fails inside such a refill leaves the rest running in order;
//! a stream whose hook is refused keeps the launcher path with the same results.

#[path = "common/fake.rs"]
mod fake;
#[path = "common/work.rs"]
mod work;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use work::Work;
use xsched_backend_cuda::{CudaCommand, CudaError, CudaStream, sys};
use xsched_core::{Capabilities, DeviceId, LaunchConfig};
use xsched_runtime::{
    CommandError, Completion, CompletionHook, HwError, HwQueue, QueueOptions, Runtime,
    RuntimeConfig, WhoSchedules, XQueue,
};

/// A CUDA stream that records the name of each launching thread, and can refuse the hook.
struct Watched {
    inner: CudaStream,
    refuse_hook: bool,
    launchers: Mutex<Vec<String>>,
}

impl Watched {
    fn new(refuse_hook: bool) -> Arc<Watched> {
        fake::use_driver();
        Arc::new(Watched {
            inner: CudaStream::new(0).expect("a stream on device 0"),
            refuse_hook,
            launchers: Mutex::new(Vec::new()),
        })
    }

    fn launches_from(&self, prefix: &str) -> usize {
        let names = self.launchers.lock().expect("launchers");
        names.iter().filter(|n| n.starts_with(prefix)).count()
    }
}

impl HwQueue for Watched {
    type Command = CudaCommand;
    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }
    fn device(&self) -> DeviceId {
        self.inner.device()
    }
    fn launch(&self, cmd: CudaCommand, done: Completion) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.launchers.lock().expect("launchers").push(name);
        self.inner.launch(cmd, done);
    }
    fn synchronize(&self) -> Result<(), HwError> {
        self.inner.synchronize()
    }
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        if self.refuse_hook {
            return Err(HwError::Backend("refused by the test".into()));
        }
        self.inner.set_completion_hook(hook)
    }
    fn deactivate(&self) -> Result<(), HwError> {
        self.inner.deactivate()
    }
    fn reactivate(&self) -> Result<(), HwError> {
        self.inner.reactivate()
    }
}

fn app_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// Threshold 8, batch 4: a synchronization point every 4 commands.
fn options() -> QueueOptions {
    options_batch(4)
}

/// Threshold 8, a synchronization point every `batch` commands.
fn options_batch(batch: u32) -> QueueOptions {
    let config = LaunchConfig::new(8, batch)
        .expect("config")
        .with_inflight_budget(None);
    QueueOptions::default().with_config(config)
}

/// Wait until the queue observed `n` completions, by polling its state: a waiter would ask the
/// launcher to look (and launch), which would blur what launched where.
fn until_completed<H: HwQueue>(q: &XQueue<H>, n: u64) {
    let start = Instant::now();
    while q.query().completed < n {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Submit `n` commands of 20 µs tagged 0.., wait for them by polling; the tags in run order.
fn run_tagged(q: &XQueue<Watched>, work: &Work, n: u32) -> Vec<u32> {
    let handles: Vec<_> = (0..n)
        .map(|t| q.submit(work.command(20, t)).expect("submit"))
        .collect();
    until_completed(q, u64::from(n));
    for h in &handles {
        h.wait().expect("command ok");
    }
    work.tags()
}

#[test]
fn sync_points_refill_on_the_watcher_without_waking_the_launcher() {
    let hw = Watched::new(false);
    let work = Work::new(200);
    let rt = app_runtime();
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    assert_eq!(run_tagged(&q, &work, 200), (0..200).collect::<Vec<_>>());
    let stats = q.refill_stats();
    assert!(stats.completion_hook, "the CUDA stream runs the hook");
    assert!(
        stats.on_completing_thread >= 10,
        "refills on the watcher: {stats:?}"
    );
    assert_eq!(stats.launcher_wakeups, 0, "launcher woken: {stats:?}");
    assert_eq!(hw.launches_from("xsched-launch-"), 0);
    assert!(
        hw.launches_from("xsched-cuda-watch") >= 100,
        "the watcher fed the stream"
    );
}

#[test]
fn a_command_failing_inside_a_refill_fails_alone_and_the_rest_run_in_order() {
    let hw = Watched::new(false);
    let work = Work::new(100);
    let rt = app_runtime();
    // Batch 1: every command is a synchronization point, the failing one too, so its failure
    // (reported inside its launch) leaves the hook work that the watcher's loop then runs.
    let q = rt
        .create_queue(hw.clone(), options_batch(1))
        .expect("queue");
    // Held while submitting: at the resume the first 8 launch from here, all later ones from
    // the watcher's refills, the failing one (the 51st) included.
    q.suspend().expect("suspend");
    let mut good: Vec<_> = (0..50)
        .map(|t| q.submit(work.command(20, t)).expect("submit"))
        .collect();
    let bad = q
        .submit(CudaCommand::Enqueue(Box::new(|_| {
            Err(CudaError::Call {
                call: "cuLaunchKernel",
                code: sys::CUresult::CUDA_ERROR_INVALID_VALUE,
            })
        })))
        .expect("submit");
    good.extend((50..100).map(|t| q.submit(work.command(20, t)).expect("submit")));
    q.resume().expect("resume");
    until_completed(&q, 101);
    // Before any wait (a waiter would wake the launcher).
    let stats = q.refill_stats();
    {
        let launchers = hw.launchers.lock().expect("launchers");
        assert_eq!(launchers.len(), 101, "each command launched once");
        assert!(
            launchers[50].starts_with("xsched-cuda-watch"),
            "the failing command launched in a refill on the watcher, not on {:?}",
            launchers[50]
        );
    }
    assert!(stats.completion_hook, "kept: {stats:?}");
    assert_eq!(
        stats.launcher_wakeups, 0,
        "the watcher ran what the failure left: {stats:?}"
    );
    assert!(matches!(bad.wait(), Err(CommandError::Failed(_))));
    for h in &good {
        h.wait().expect("command ok");
    }
    assert_eq!(work.tags(), (0..100).collect::<Vec<_>>());
}

#[test]
fn a_refused_hook_keeps_the_launcher_path_with_the_same_results() {
    let hw = Watched::new(true);
    let work = Work::new(200);
    let rt = app_runtime();
    let q = rt.create_queue(hw.clone(), options()).expect("queue");
    assert_eq!(run_tagged(&q, &work, 200), (0..200).collect::<Vec<_>>());
    let stats = q.refill_stats();
    assert!(!stats.completion_hook);
    assert_eq!(stats.on_completing_thread, 0);
    assert!(
        stats.launcher_wakeups >= 10,
        "the launcher refills: {stats:?}"
    );
    assert_eq!(hw.launches_from("xsched-cuda-watch"), 0);
}
