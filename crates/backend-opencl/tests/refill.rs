//! Refill on OpenCL's callback thread, on POCL: the queue runs an XQueue's
//! completion hook in the event callback of a synchronization point, so the refill launches
//! from the implementation's thread and the launcher thread is not woken for it; a callback
//! that cannot be registered gives the hook back and the launcher refills; no path changes a
//! command's result or order, and a Level-2 hold still demotes the threads that refilled (one
//! that begins during a refill, once the refill is over).
//!
//! Each test command waits on a gate (a user event) that opens only once its launch registered
//! the callback, so its completion always comes from POCL's thread. Without the gate a command
//! that ends before its callback is registered completes inside the launch (the hand-over
//! path), and how often depends on the machine's load: on a busy CI machine every one did.

mod common;

use common::{Cl, SendKernel, app_runtime, enqueue, hw, opencl, read, record_kernel};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xsched_backend_opencl::cl3::event::CL_COMPLETE;
use xsched_backend_opencl::cl3::types::cl_uint;
use xsched_backend_opencl::{Event, OclCommand, OclQueue};
use xsched_core::{Capabilities, DeviceId, LaunchConfig, Level};
use xsched_runtime::{
    CommandError, CommandHandle, Completion, CompletionHook, HwError, HwQueue, QueueOptions, XQueue,
};

/// Run on the first launch from a callback thread (other than the named test thread), with
/// the queue's lock held.
type Probe = (String, Box<dyn FnOnce(&OclQueue) + Send>);

/// An OpenCL queue that records which thread launched each command.
struct Watched {
    inner: Arc<OclQueue>,
    /// (thread id, thread name) per launch.
    launchers: Mutex<Vec<(libc::pid_t, String)>>,
    probe: Mutex<Option<Probe>>,
    /// The thread that ran the probe, and its scheduling policy right after it.
    probed: Mutex<Option<(libc::pid_t, libc::c_int)>>,
}

impl Watched {
    fn new(cl: &Cl) -> Arc<Watched> {
        Arc::new(Watched {
            inner: hw(cl),
            launchers: Mutex::new(Vec::new()),
            probe: Mutex::new(None),
            probed: Mutex::new(None),
        })
    }

    /// Run `probe` on the first launch from a callback thread, not `test` nor a launcher.
    fn arm(&self, test: String, probe: impl FnOnce(&OclQueue) + Send + 'static) {
        *self.probe.lock().expect("probe") = Some((test, Box::new(probe)));
    }

    /// The threads that launched, other than xsched's launcher and `test` (the submitting
    /// thread): OpenCL's callback threads, refilling.
    fn callback_launchers(&self, test: &str) -> Vec<libc::pid_t> {
        let mut tids: Vec<_> = self
            .launchers
            .lock()
            .expect("launchers")
            .iter()
            .filter(|(_, name)| !name.starts_with("xsched-launch-") && name != test)
            .map(|&(tid, _)| tid)
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids
    }
}

impl HwQueue for Watched {
    type Command = OclCommand;
    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }
    fn device(&self) -> DeviceId {
        self.inner.device()
    }
    fn launch(&self, cmd: OclCommand, done: Completion) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        let probe = {
            let mut probe = self.probe.lock().expect("probe");
            let from_callback = probe
                .as_ref()
                .is_some_and(|(test, _)| !name.starts_with("xsched-launch-") && name != *test);
            if from_callback { probe.take() } else { None }
        };
        self.launchers.lock().expect("launchers").push((tid, name));
        if let Some((_, probe)) = probe {
            probe(&self.inner);
            // SAFETY: no memory arguments; 0 is the calling thread.
            let policy = unsafe { libc::sched_getscheduler(0) };
            *self.probed.lock().expect("probed") = Some((tid, policy));
        }
        self.inner.launch(cmd, done);
        // The launch registered its callbacks: the commands it enqueued may run now.
        for gate in GATES.with_borrow_mut(std::mem::take) {
            gate.set_status(CL_COMPLETE).expect("open the gate");
        }
    }
    fn synchronize(&self) -> Result<(), HwError> {
        self.inner.synchronize()
    }
    fn before_queue_lock(&self) {
        self.inner.before_queue_lock();
    }
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        self.inner.set_completion_hook(hook)
    }
    fn deactivate(&self) -> Result<(), HwError> {
        self.inner.deactivate()
    }
    fn reactivate(&self) -> Result<(), HwError> {
        self.inner.reactivate()
    }
}

/// Threshold 8, batch 4: a synchronization point every 4 commands.
fn options() -> QueueOptions {
    let config = LaunchConfig::new(8, 4)
        .expect("config")
        .with_inflight_budget(None);
    QueueOptions::default().with_config(config)
}

thread_local! {
    /// The gates of the commands this thread's current launch enqueued (see the module docs).
    static GATES: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
}

/// A command appending `tag` to `log`, behind a gate that [`Watched::launch`] opens once the
/// command's callback is registered.
fn record(cl: &Cl, log: &common::Log, tag: cl_uint) -> OclCommand {
    let kernel = SendKernel(record_kernel(cl, &log.log, &log.next, tag));
    let gate = Event::user(cl.context.get()).expect("gate");
    OclCommand::Enqueue(Box::new(move |raw| {
        let event = enqueue(raw, &kernel.0, &[gate.raw()]);
        GATES.with_borrow_mut(|gates| gates.push(gate));
        event
    }))
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

/// `f()` once its two lists agree, or after 10 s (then the caller's assertion shows them).
fn until_settled<T: PartialEq>(f: impl Fn() -> (Vec<T>, Vec<T>)) -> (Vec<T>, Vec<T>) {
    let start = Instant::now();
    loop {
        let (a, b) = f();
        if a == b || start.elapsed() > Duration::from_secs(10) {
            return (a, b);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Taken by each test: a Level-2 hold demotes the whole process's device threads, so tests run
/// in one process (`cargo test`; nextest gives each its own) must not overlap.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn test_name() -> String {
    std::thread::current().name().unwrap_or("").to_string()
}

#[test]
fn sync_points_refill_on_the_callback_thread_in_order() {
    let _alone = one_at_a_time();
    let Some(cl) = opencl() else { return };
    let n = 200;
    let log = common::Log::new(&cl, n);
    let rt = app_runtime();
    let hw = Watched::new(&cl);
    let q = rt.create_queue(hw.clone(), options()).expect("xqueue");
    let handles: Vec<CommandHandle> = (0..n as cl_uint)
        .map(|tag| q.submit(record(&cl, &log, tag)).expect("submit"))
        .collect();
    until_completed(&q, n as u64);
    for h in &handles {
        assert_eq!(h.wait(), Ok(()));
    }
    q.hw().synchronize().expect("synchronize");
    assert_eq!(
        read(&cl, &log.log, n),
        (0..n as cl_uint).collect::<Vec<_>>(),
        "in order, each once"
    );
    let stats = q.refill_stats();
    eprintln!("{stats:?}");
    assert!(stats.completion_hook, "the OpenCL queue runs the hook");
    // ~50 synchronization points (every 4th command, and the last).
    assert!(
        stats.on_completing_thread >= 10,
        "refills on the callback thread: {stats:?}"
    );
    assert!(
        !hw.callback_launchers(&test_name()).is_empty(),
        "OpenCL's callback threads fed the queue"
    );
}

#[test]
fn a_callback_that_cannot_be_registered_fails_its_command_and_gives_the_hook_back() {
    let _alone = one_at_a_time();
    let Some(cl) = opencl() else { return };
    let n = 120;
    let log = common::Log::new(&cl, n);
    let rt = app_runtime();
    let hw = Watched::new(&cl);
    let q = rt.create_queue(hw.clone(), options()).expect("xqueue");
    let mut handles: Vec<CommandHandle> = (0..n as cl_uint / 2)
        .map(|tag| q.submit(record(&cl, &log, tag)).expect("submit"))
        .collect();
    until_completed(&q, n as u64 / 2);
    assert!(q.refill_stats().completion_hook);
    // An enqueue that hands back no event: its callback cannot be registered.
    let bad = q
        .submit(OclCommand::Enqueue(Box::new(|_| {
            // SAFETY: this breaks `from_raw`'s contract (null is no valid event) on purpose. The
            // queue passes the null handle to clRetainEvent (its copy for `synchronize`: fails,
            // logged), to clSetEventCallback (fails: the failure under test) and, when the
            // `Event` drops, to clReleaseEvent (fails, logged). No Rust code dereferences it;
            // the test relies on the ICD loader / POCL checking for NULL and returning
            // CL_INVALID_EVENT, as the ICD loaders and POCL 3.1 do, rather than reading it.
            Ok(unsafe { Event::from_raw(std::ptr::null_mut()) })
        })))
        .expect("submit");
    handles.extend(
        (n as cl_uint / 2..n as cl_uint)
            .map(|tag| q.submit(record(&cl, &log, tag)).expect("submit")),
    );
    // Before any wait: a waiter wakes the launcher itself, with or without the give-back.
    until_completed(&q, n as u64 + 1);
    let stats = q.refill_stats();
    eprintln!("{stats:?}");
    assert!(!stats.completion_hook, "given back");
    // The ~15 synchronization points after the bad command.
    assert!(
        stats.launcher_wakeups > 0,
        "the launcher refills: {stats:?}"
    );
    match bad.wait() {
        Err(CommandError::Failed(m)) => assert!(m.contains("clSetEventCallback"), "{m}"),
        other => panic!("expected the registration's failure, got {other:?}"),
    }
    for h in &handles {
        assert_eq!(h.wait(), Ok(()));
    }
    q.hw().synchronize().expect("synchronize");
    assert_eq!(
        read(&cl, &log.log, n),
        (0..n as cl_uint).collect::<Vec<_>>(),
        "in order, each once"
    );
}

/// The scheduling policy of thread `tid` of this process (`stat` field 41).
fn policy(tid: libc::pid_t) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(41 - 3)?.parse().ok()
}

const SCHED_IDLE: u32 = 5;

/// Submit batches of `n` commands, each run to the end with its results checked, until `done`
/// (a callback thread has refilled: on a loaded machine the launcher may keep up through a
/// whole batch), at most 10.
fn batches_until(cl: &Cl, q: &XQueue<Watched>, n: usize, done: impl Fn() -> bool) {
    for batch in 1..=10u64 {
        let log = common::Log::new(cl, n);
        let handles: Vec<CommandHandle> = (0..n as cl_uint)
            .map(|tag| q.submit(record(cl, &log, tag)).expect("submit"))
            .collect();
        until_completed(q, batch * n as u64);
        for h in &handles {
            assert_eq!(h.wait(), Ok(()));
        }
        if done() {
            return;
        }
    }
}

#[test]
fn a_level_2_hold_demotes_the_callback_threads_that_refilled() {
    let _alone = one_at_a_time();
    let Some(cl) = opencl() else { return };
    let n = 100;
    let rt = app_runtime();
    let hw = Watched::new(&cl);
    let q = rt.create_queue(hw.clone(), options()).expect("xqueue");
    if q.hw().capabilities().max_level < Level::Deactivate {
        eprintln!("skipped: Level 2 by thread priority is not offered here");
        return;
    }
    batches_until(&cl, &q, n, || {
        !hw.callback_launchers(&test_name()).is_empty()
    });
    let refilled = hw.callback_launchers(&test_name());
    assert!(!refilled.is_empty(), "callback threads refilled");
    q.suspend()
        .expect("suspend: Level 2 holds the device's threads");
    // A callback thread may still be inside the refill that completed the last command (its
    // handle is done before the refill returns): spared until that refill ends, then demoted.
    let (idle, alive) = until_settled(|| {
        let idle: Vec<_> = refilled
            .iter()
            .filter(|&&t| policy(t).is_some_and(|p| p == SCHED_IDLE))
            .copied()
            .collect();
        let alive: Vec<_> = refilled
            .iter()
            .filter(|&&t| policy(t).is_some())
            .copied()
            .collect();
        (idle, alive)
    });
    assert_eq!(idle, alive, "every live thread that refilled is demoted");
    q.resume().expect("resume");
    assert!(
        refilled
            .iter()
            .all(|&t| policy(t).is_none_or(|p| p != SCHED_IDLE)),
        "restored"
    );
}

#[test]
fn a_hold_that_begins_during_a_refill_spares_the_refilling_thread_until_the_refill_ends() {
    let _alone = one_at_a_time();
    let Some(cl) = opencl() else { return };
    let n = 40;
    let rt = app_runtime();
    let hw = Watched::new(&cl);
    let q = rt.create_queue(hw.clone(), options()).expect("xqueue");
    if q.hw().capabilities().max_level < Level::Deactivate {
        eprintln!("skipped: Level 2 by thread priority is not offered here");
        return;
    }
    // Inside a refill, holding the queue's lock: another thread (as a suspend would) holds the
    // device's threads. Without its own lock, so the refill goes on once the hold began.
    hw.arm(test_name(), |inner| {
        std::thread::scope(|s| {
            s.spawn(|| inner.deactivate().expect("hold"))
                .join()
                .expect("holder");
        });
    });
    batches_until(&cl, &q, n, || hw.probed.lock().expect("probed").is_some());
    let (tid, during) = hw
        .probed
        .lock()
        .expect("probed")
        .expect("a callback thread refilled");
    assert_ne!(
        u32::try_from(during).ok(),
        Some(SCHED_IDLE),
        "a refilling thread keeps its priority while it holds the queue's lock"
    );
    if let Some(after) = policy(tid) {
        assert_eq!(after, SCHED_IDLE, "the refill over, the hold demotes it");
    }
    hw.inner.reactivate().expect("release");
    assert!(policy(tid).is_none_or(|p| p != SCHED_IDLE), "restored");
}
