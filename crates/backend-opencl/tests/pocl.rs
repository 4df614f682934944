//! The OpenCL backend on a real OpenCL implementation (POCL here, installed by
//! `scripts/test.sh`). Without OpenCL these tests fail under CI (`CI=true`) and are skipped
//! elsewhere, saying why.

mod common;

use common::{Cl, SendKernel, app_runtime, buffer, enqueue, hw, opencl, read, record_kernel};
use opencl3::memory::Buffer;
use std::sync::Arc;
use std::time::Duration;
use xsched_backend_opencl::cl3::event::{CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS};
use xsched_backend_opencl::cl3::types::{cl_int, cl_uint};
use xsched_backend_opencl::{Event, OclCommand, OclError, OclQueue, cl3};
use xsched_core::{CoreError, Level};
use xsched_runtime::{
    CommandError, CommandHandle, HwError, HwQueue, QueueOptions, Runtime, RuntimeError, XQueue,
};

fn status(event: &Event) -> cl_int {
    cl3::event::get_event_info(event.raw(), CL_EVENT_COMMAND_EXECUTION_STATUS)
        .expect("status")
        .into()
}

/// The first listing, from many threads at once (before `opencl()`, which lists): POCL
/// initializes its devices in the first `clGetDeviceIDs`, and without the backend's own lock a
/// second thread's query read a device not yet set up (a crash in most runs of four threads).
#[test]
fn devices_listed_from_many_threads_at_once_agree() {
    let listings: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..8)
            .map(|_| s.spawn(xsched_backend_opencl::devices))
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("lister"))
            .collect()
    });
    let Ok(first) = &listings[0] else {
        assert!(std::env::var("CI").is_err(), "CI needs OpenCL");
        return;
    };
    assert!(
        listings.iter().all(|l| l.as_ref() == Ok(first)),
        "{listings:?}"
    );
}

#[test]
fn the_device_is_listed_with_its_capability_table() {
    let Some(_cl) = opencl() else { return };
    let devices = xsched_backend_opencl::devices().expect("devices");
    assert!(!devices.is_empty());
    assert_eq!(
        devices[0].id,
        xsched_core::DeviceId(xsched_backend_opencl::FIRST_DEVICE_ID)
    );
    let caps = xsched_backend_opencl::capabilities(devices[0].cpu);
    assert!(devices[0].cpu, "POCL's device is the CPU");
    assert!(caps.max_level <= Level::Deactivate, "never Level 3");
    assert!(!caps.keeps_state);
}

#[test]
fn launched_commands_run_in_submission_order_and_complete() {
    let Some(cl) = opencl() else { return };
    let (log, next) = (buffer(&cl, 32), buffer(&cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(&cl), QueueOptions::default())
        .expect("xqueue");
    let mut handles = Vec::new();
    for tag in 0..32 {
        let kernel = SendKernel(record_kernel(&cl, &log, &next, tag + 100));
        let cmd = OclCommand::Enqueue(Box::new(move |raw| enqueue(raw, &kernel.0, &[])));
        handles.push(q.submit(cmd).expect("submit"));
    }
    for h in &handles {
        assert_eq!(h.wait(), Ok(()));
    }
    q.hw().synchronize().expect("synchronize");
    let want: Vec<cl_uint> = (100..132).collect();
    assert_eq!(read(&cl, &log, 32), want);
}

/// A suspended XQueue with one gated command submitted, which records `tag` when it runs.
struct Gated {
    _rt: Runtime,
    q: XQueue<OclQueue>,
    log: Buffer<cl_uint>,
    _next: Buffer<cl_uint>,
    /// The application's event of the command.
    mine: Event,
    handle: CommandHandle,
}

fn gated_behind_a_suspend(cl: &Cl, tag: cl_uint) -> Gated {
    let (log, next) = (buffer(cl, 1), buffer(cl, 1));
    let rt = app_runtime();
    let q = rt
        .create_queue(hw(cl), QueueOptions::default())
        .expect("xqueue");
    q.suspend().expect("suspend");
    let kernel = record_kernel(cl, &log, &next, tag);
    let (mine, gated) = q
        .hw()
        .enqueue_gated(&[], |waits| {
            enqueue(cl.queue.get(), &kernel, waits).map(Event::into_raw)
        })
        .expect("a gate")
        .expect("enqueued behind the gate");
    cl.queue.flush().expect("flush");
    let handle = q.submit(gated).expect("submit");
    Gated {
        _rt: rt,
        q,
        log,
        _next: next,
        mine,
        handle,
    }
}

#[test]
fn a_gated_command_reaches_the_device_only_when_launched() {
    let Some(cl) = opencl() else { return };
    let g = gated_behind_a_suspend(&cl, 7);
    std::thread::sleep(Duration::from_millis(50));
    assert_ne!(status(&g.mine), CL_COMPLETE, "suspended: not launched yet");
    assert!(!g.handle.is_done());
    g.q.resume().expect("resume");
    assert_eq!(g.handle.wait(), Ok(()));
    assert_eq!(status(&g.mine), CL_COMPLETE);
    assert_eq!(read(&cl, &g.log, 1), vec![7]);
}

#[test]
fn a_failed_enqueue_fails_its_command_with_the_status_and_the_queue_goes_on() {
    let Some(cl) = opencl() else { return };
    // Launched inline (the submitting thread, queue idle) and deferred (launched when the
    // queue resumes): the failure is the command's alone either way.
    for deferred in [false, true] {
        let (log, next) = (buffer(&cl, 1), buffer(&cl, 1));
        let rt = app_runtime();
        let q = rt
            .create_queue(hw(&cl), QueueOptions::default())
            .expect("xqueue");
        if deferred {
            q.suspend().expect("suspend");
        }
        let bad = q
            .submit(OclCommand::Enqueue(Box::new(|_| {
                Err(cl3::error_codes::CL_INVALID_KERNEL)
            })))
            .expect("submit");
        let kernel = SendKernel(record_kernel(&cl, &log, &next, 9));
        let good = q
            .submit(OclCommand::Enqueue(Box::new(move |raw| {
                enqueue(raw, &kernel.0, &[])
            })))
            .expect("submit");
        if deferred {
            assert!(!bad.is_done(), "suspended: nothing launched yet");
            q.resume().expect("resume");
        }
        match bad.wait() {
            Err(CommandError::Failed(msg)) => assert!(msg.contains("CL_INVALID_KERNEL"), "{msg}"),
            other => panic!("expected a failure (deferred: {deferred}), got {other:?}"),
        }
        assert_eq!(good.wait(), Ok(()), "deferred: {deferred}");
        assert_eq!(read(&cl, &log, 1), vec![9]);
    }
}

/// The scheduling policy of each thread of this process (`/proc/self/task/*/stat` field 41),
/// with its name.
fn thread_policies() -> Vec<(String, u32)> {
    std::fs::read_dir("/proc/self/task")
        .expect("threads")
        .flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            // Fields after the parenthesised name: state is field 3, policy field 41.
            let rest = &stat[stat.rfind(')')? + 2..];
            let policy = rest.split(' ').nth(41 - 3)?.parse().ok()?;
            Some((name.trim().to_string(), policy))
        })
        .collect()
}

const SCHED_IDLE: u32 = 5;

#[test]
fn level_2_on_the_cpu_device_runs_a_deactivated_process_at_idle_priority_and_restores_it() {
    let Some(cl) = opencl() else { return };
    let cpu = xsched_backend_opencl::devices().expect("devices")[0].cpu;
    let caps = xsched_backend_opencl::capabilities(cpu);
    let (a, b) = (hw(&cl), hw(&cl));
    if caps.max_level < Level::Deactivate {
        eprintln!(
            "Level 2 by thread priority not offered here: {}",
            caps.preemption_unit
        );
        assert_eq!(a.deactivate(), Err(HwError::Unsupported(Level::Deactivate)));
        return;
    }
    // POCL's worker threads exist once a kernel ran.
    let (log, next) = (buffer(&cl, 1), buffer(&cl, 1));
    let kernel = record_kernel(&cl, &log, &next, 1);
    let event = enqueue(cl.queue.get(), &kernel, &[]).expect("enqueue");
    event.wait().expect("ran");
    let idle = || {
        thread_policies()
            .into_iter()
            .filter(|(_, p)| *p == SCHED_IDLE)
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    assert!(
        idle().is_empty(),
        "nothing idle before: {:?}",
        thread_policies()
    );
    // An application thread that submitted before the hold, and one that submits during it.
    let early = submitter("app-submitter", &a);
    let (spawn, spawn_now) = std::sync::mpsc::channel::<()>();
    let (park, parked) = std::sync::mpsc::channel::<()>();
    let (started, spawner_started) = std::sync::mpsc::channel::<()>();
    let spawner = std::thread::Builder::new()
        .name("idle-spawner".into())
        .spawn(move || {
            started.send(()).ok()?;
            spawn_now.recv().ok()?;
            std::thread::Builder::new()
                .name("inherited".into())
                .spawn(move || {
                    let _ = parked.recv();
                })
                .ok()
        })
        .expect("spawn");
    spawner_started.recv().expect("the spawner started");
    let late = submitter("late-submitter", &a);
    early.submit();
    a.deactivate().expect("deactivate");
    assert!(
        idle().is_empty(),
        "another CPU-device queue is still active"
    );
    b.deactivate().expect("deactivate");
    let demoted = idle();
    assert!(
        demoted.iter().any(|n| n != "late-submitter"),
        "POCL's threads demoted: {:?}",
        thread_policies()
    );
    assert!(
        demoted.iter().all(|n| !n.starts_with("xsched-")),
        "xsched's own threads stay prompt: {demoted:?}"
    );
    assert!(
        !demoted.iter().any(|n| n == "app-submitter"),
        "a thread that submits holds the queue's locks: never demoted: {demoted:?}"
    );
    assert!(
        demoted.iter().any(|n| n == "late-submitter"),
        "a thread that never submitted is demoted like any other: {demoted:?}"
    );
    late.submit();
    assert!(
        !idle().iter().any(|n| n == "late-submitter"),
        "a demoted thread that submits restores itself first: {:?}",
        thread_policies()
    );
    // A thread started by a demoted thread inherits SCHED_IDLE; the release gives it back.
    spawn.send(()).expect("spawner alive");
    // Both the spawner and its child run at idle priority: on a busy machine that can take a
    // while (a bound on waiting, not a timing claim).
    let mut waited = 0;
    while !idle().iter().any(|n| n == "inherited") && waited < 600 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    assert!(
        idle().iter().any(|n| n == "inherited"),
        "a child of a demoted thread starts at SCHED_IDLE: {:?}",
        thread_policies()
    );
    b.deactivate().expect("idempotent");
    b.reactivate().expect("reactivate");
    assert!(
        idle().is_empty(),
        "one queue active again: all restored, the inherited thread too: {:?}",
        thread_policies()
    );
    drop(park);
    if let Ok(Some(inherited)) = spawner.join() {
        let _ = inherited.join();
    }
    drop(b);
    assert!(
        !idle().is_empty(),
        "only the held queue is left: demoted again"
    );
    drop(a);
    assert!(
        idle().is_empty(),
        "a dropped held queue restores: {:?}",
        thread_policies()
    );
    drop((early, late));
}

/// An application thread, named `name`, that enters `queue` as a submitting thread each time
/// it is told to (and returns once it has).
struct Submitter {
    go: std::sync::mpsc::Sender<()>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Submitter {
    fn submit(&self) {
        self.go.send(()).expect("submitter alive");
        self.done.recv().expect("submitter entered");
    }
}

fn submitter(name: &str, queue: &Arc<OclQueue>) -> Submitter {
    submitter_then(name, queue, || {})
}

/// A submitter that does what the shim does after each submit (`after_submit`).
fn rejoining_submitter(name: &str, queue: &Arc<OclQueue>) -> Submitter {
    submitter_then(name, queue, xsched_backend_opencl::after_submit)
}

fn submitter_then(
    name: &str,
    queue: &Arc<OclQueue>,
    after: impl Fn() + Send + 'static,
) -> Submitter {
    let (go, went) = std::sync::mpsc::channel::<()>();
    let (entered, done) = std::sync::mpsc::channel();
    // Weak, so the test still decides when the queue drops.
    let queue = Arc::downgrade(queue);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // Running, so named: a thread demoted before it ran could not name itself for
            // long on a busy machine, and the test finds threads by name.
            let _ = entered.send(());
            for () in went {
                if let Some(queue) = queue.upgrade() {
                    queue.before_queue_lock();
                    after();
                }
                if entered.send(()).is_err() {
                    break;
                }
            }
        })
        .expect("spawn");
    done.recv().expect("the submitter started");
    Submitter { go, done }
}

#[test]
fn a_thread_submitting_to_a_held_process_runs_its_own_code_at_idle_priority_until_the_release() {
    let Some(cl) = opencl() else { return };
    let cpu = xsched_backend_opencl::devices().expect("devices")[0].cpu;
    if xsched_backend_opencl::capabilities(cpu).max_level < Level::Deactivate {
        return; // Level 2 by thread priority not offered here (the test above says why)
    }
    let queue = hw(&cl);
    let host = rejoining_submitter("host-code", &queue);
    let idle = || {
        thread_policies()
            .iter()
            .any(|(n, p)| n == "host-code" && *p == SCHED_IDLE)
    };
    host.submit();
    assert!(!idle(), "nothing held: a submit changes nothing");
    queue.deactivate().expect("deactivate");
    assert!(!idle(), "a submitting thread is spared by the hold itself");
    host.submit();
    assert!(
        idle(),
        "after a submit to the held process: {:?}",
        thread_policies()
    );
    host.submit();
    assert!(idle(), "raised for its lock, lowered again after it");
    queue.reactivate().expect("reactivate");
    assert!(!idle(), "the release restores it: {:?}", thread_policies());
    host.submit();
    assert!(!idle(), "active again: a submit changes nothing");
    drop(host);
}

#[test]
fn level_3_is_refused_clearly_and_level_2_only_where_offered() {
    let Some(cl) = opencl() else { return };
    let rt = app_runtime();
    let cpu = xsched_backend_opencl::devices().expect("devices")[0].cpu;
    let max = xsched_backend_opencl::capabilities(cpu).max_level;
    let err = rt
        .create_queue(
            hw(&cl),
            QueueOptions::default().with_level(Level::Interrupt),
        )
        .err();
    assert!(matches!(
        err,
        Some(RuntimeError::Core(CoreError::UnsupportedLevel {
            requested: Level::Interrupt,
            max: m,
        })) if m == max
    ));
    assert_eq!(
        xsched_backend_opencl::capabilities(false).max_level,
        Level::Block,
        "GPUs, NPUs, FPGAs: Level 1"
    );
    let q = hw(&cl);
    assert_eq!(q.interrupt(), Err(HwError::Unsupported(Level::Interrupt)));
}

#[test]
fn an_invalid_queue_is_refused_with_the_status() {
    let Some(_cl) = opencl() else { return };
    // SAFETY: a null queue is rejected by the OpenCL loader before any dereference.
    let err = unsafe { OclQueue::from_raw(std::ptr::null_mut()) }.err();
    assert!(
        matches!(err, Some(OclError::Call { code, .. }) if code == cl3::error_codes::CL_INVALID_COMMAND_QUEUE),
        "{err:?}"
    );
}

#[test]
fn a_gated_command_dropped_unlaunched_still_runs_and_finish_returns() {
    let Some(cl) = opencl() else { return };
    let g = gated_behind_a_suspend(&cl, 9);
    // The command is cancelled before launch: xsched drops it, and its gate opens, so the
    // application's real command is not left behind a closed gate (clFinish would hang).
    assert_eq!(g.q.cancel_pending().expect("cancel"), 1);
    assert!(g.handle.wait().is_err(), "cancelled on the xsched side");
    cl.queue.finish().expect("clFinish returns");
    assert_eq!(status(&g.mine), CL_COMPLETE);
    assert_eq!(read(&cl, &g.log, 1), vec![9]);
}
