//! Queues: create, submit, wait, suspend/resume, level, launch config, hints, query, cancel.

use crate::ffi::{give, guard, handle, take, write};
use crate::kernel::XschedKernel;
use crate::runtime::{XschedDevice, XschedRuntime};
use crate::status::{Failure, XschedStatus};
use std::ffi::c_void;
use std::sync::Arc;
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_core::{CommandId, CoreError, Hint, LaunchConfig, Level, Nanos};
use xsched_runtime::{QueueOptions, XQueue};

/// A preemptible queue in front of one hardware queue of a device.
pub struct XschedQueue(XQueue<CpuQueue>);

/// A snapshot of a queue.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct XschedQueueState {
    /// Submitted, not yet launched.
    pub pending: u64,
    /// Launched, not yet observed complete.
    pub in_flight: u64,
    /// Commands observed complete (ids below this).
    pub completed: u64,
    /// Whether launching is suspended.
    pub suspended: bool,
    /// The preemption level, 1 to 3.
    pub level: u8,
}

/// A host function run as a command, with the user pointer given at submission. It runs on a
/// device worker thread, so `user` must be usable from another thread.
pub type XschedCallback = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// The user pointer of a callback command, moved to the worker thread that runs it.
struct UserPointer(*mut c_void);

// SAFETY: the C caller promises (see `XschedCallback`) that `user` may be used from the worker
// thread; xsched itself never dereferences it.
unsafe impl Send for UserPointer {}

/// Create a queue on a new hardware queue of `device`, configured from `XSCHED_PRIORITY`,
/// `XSCHED_LEVEL`, `XSCHED_THRESHOLD`, `XSCHED_BATCH`, `XSCHED_INFLIGHT_US` and the other
/// hint variables (defaults: priority 0, the device's highest level, threshold 16, batch 8).
///
/// # Safety
/// `rt` and `device` must be NULL or live handles; `out` valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_create(
    rt: *const XschedRuntime,
    device: *const XschedDevice,
    out: *mut *mut XschedQueue,
) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, NULL or live handles.
        let (rt, device) = unsafe { (handle(rt, "runtime")?, handle(device, "device")?) };
        let options = QueueOptions::from_env()?;
        let q =
            rt.0.create_queue(Arc::new(device.0.create_queue()), options)?;
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, XschedQueue(q), "out") }
    })
}

/// Destroy a queue (NULL is ignored): it leaves the scheduler, resumes if suspended, and waits
/// until every submitted command completed (cancel first to drop pending ones).
///
/// # Safety
/// `queue` must be NULL or a live queue handle, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_destroy(queue: *mut XschedQueue) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, a live queue handle or NULL.
        drop(unsafe { take(queue) });
        Ok(())
    })
}

/// Run `queue`'s body against a borrowed handle.
fn with_queue(
    queue: *const XschedQueue,
    body: impl FnOnce(&XQueue<CpuQueue>) -> Result<(), Failure>,
) -> XschedStatus {
    guard(|| {
        // SAFETY: every exported caller passes its own argument, NULL or a live handle by its
        // contract.
        let q = unsafe { handle(queue, "queue") }?;
        body(&q.0)
    })
}

/// Submit a host callback; `*command` receives its id (may be NULL if not needed).
///
/// # Safety
/// `queue` must be NULL or live; `callback` callable from another thread with `user`;
/// `command` NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_submit_callback(
    queue: *const XschedQueue,
    callback: XschedCallback,
    user: *mut c_void,
    command: *mut u64,
) -> XschedStatus {
    with_queue(queue, |q| {
        let f =
            callback.ok_or_else(|| Failure::new(XschedStatus::NullPointer, "callback is NULL"))?;
        let user = UserPointer(user);
        let h = q.submit(CpuCommand::host(move || {
            let user = user;
            // SAFETY: the caller guarantees `f` may be called with `user` on this thread.
            unsafe { f(user.0) }
        }))?;
        if command.is_null() {
            return Ok(());
        }
        // SAFETY: non-null `command` is valid for writes by contract.
        unsafe { write(command, h.id().0, "command") }
    })
}

/// Submit a built-in kernel; `*command` receives its id (may be NULL).
///
/// # Safety
/// `queue` and `kernel` must be NULL or live handles; `command` NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_submit_kernel(
    queue: *const XschedQueue,
    kernel: *const XschedKernel,
    command: *mut u64,
) -> XschedStatus {
    with_queue(queue, |q| {
        // SAFETY: by contract, NULL or a live kernel handle.
        let k = unsafe { handle(kernel, "kernel") }?;
        let h = q.submit(CpuCommand::Kernel(k.kernel.clone()))?;
        if command.is_null() {
            return Ok(());
        }
        // SAFETY: non-null `command` is valid for writes by contract.
        unsafe { write(command, h.id().0, "command") }
    })
}

/// Block until `command` completed; its outcome (`COMMAND_FAILED`, `CANCELLED`, ...).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_wait(
    queue: *const XschedQueue,
    command: u64,
) -> XschedStatus {
    with_queue(queue, |q| Ok(q.wait(CommandId(command))??))
}

/// Block until every command submitted so far completed; the first failure among them.
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_wait_all(queue: *const XschedQueue) -> XschedStatus {
    with_queue(queue, |q| Ok(q.wait_all()?))
}

/// Stop launching (and deactivate/interrupt at Levels 2/3). Under a scheduler, its next
/// decision may resume the queue.
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_suspend(queue: *const XschedQueue) -> XschedStatus {
    with_queue(queue, |q| Ok(q.suspend()?))
}

/// Launch again (and reactivate/restore).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_resume(queue: *const XschedQueue) -> XschedStatus {
    with_queue(queue, |q| Ok(q.resume()?))
}

/// Set the preemption level (1 block, 2 deactivate, 3 interrupt). Fails with
/// `UNSUPPORTED_LEVEL` beyond the device, `SUSPENDED` while suspended.
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_level(
    queue: *const XschedQueue,
    level: u8,
) -> XschedStatus {
    with_queue(queue, |q| {
        let level = Level::try_from(level).map_err(CoreError::from)?;
        Ok(q.set_level(level)?)
    })
}

/// Set the launch config: at most `threshold` in flight, a sync point every `batch`, and an
/// in-flight time budget of `inflight_us` microseconds at Level 1 (0: none). Fails with
/// `INVALID_CONFIG` unless `threshold >= batch >= 1`.
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_launch_config(
    queue: *const XschedQueue,
    threshold: u32,
    batch: u32,
    inflight_us: u64,
) -> XschedStatus {
    with_queue(queue, |q| {
        let budget = (inflight_us > 0).then(|| Nanos::from_us(inflight_us));
        let config = LaunchConfig::new(threshold, batch)?.with_inflight_budget(budget);
        Ok(q.set_config(config)?)
    })
}

fn hint(queue: *const XschedQueue, h: Hint) -> XschedStatus {
    with_queue(queue, |q| Ok(q.set_hint(h)?))
}

/// Fixed priority; higher is more urgent.
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_priority(
    queue: *const XschedQueue,
    priority: i32,
) -> XschedStatus {
    hint(queue, Hint::Priority(priority))
}

/// Bandwidth share weight (positive).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_share(
    queue: *const XschedQueue,
    share: u32,
) -> XschedStatus {
    hint(queue, Hint::Share(share))
}

/// Time slice for share policies, in microseconds (positive).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_timeslice_us(
    queue: *const XschedQueue,
    us: u64,
) -> XschedStatus {
    hint(queue, Hint::TimeSlice(Nanos::from_us(us)))
}

/// Laxity in microseconds (for the `laxity` policy).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_laxity_us(
    queue: *const XschedQueue,
    us: u64,
) -> XschedStatus {
    hint(queue, Hint::Laxity(Nanos::from_us(us)))
}

/// Relative deadline in microseconds (for deadline policies).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_deadline_us(
    queue: *const XschedQueue,
    us: u64,
) -> XschedStatus {
    hint(queue, Hint::Deadline(Nanos::from_us(us)))
}

/// Request latency target in microseconds (for `slo-aware`: the queues it protects).
///
/// # Safety
/// `queue` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_set_slo_us(
    queue: *const XschedQueue,
    us: u64,
) -> XschedStatus {
    hint(queue, Hint::Slo(Nanos::from_us(us)))
}

/// A snapshot of the queue.
///
/// # Safety
/// `queue` must be NULL or a live handle; `out` valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_query(
    queue: *const XschedQueue,
    out: *mut XschedQueueState,
) -> XschedStatus {
    with_queue(queue, |q| {
        let s = q.query();
        let state = XschedQueueState {
            pending: s.pending as u64,
            in_flight: s.in_flight as u64,
            completed: s.completed,
            suspended: s.suspended,
            level: s.level.number(),
        };
        // SAFETY: `out` is valid for writes by contract.
        unsafe { write(out, state, "out") }
    })
}

/// Drop every command not yet launched (their waits return `CANCELLED`); `*count` receives how
/// many (may be NULL).
///
/// # Safety
/// `queue` must be NULL or a live handle; `count` NULL or valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_queue_cancel_pending(
    queue: *const XschedQueue,
    count: *mut u64,
) -> XschedStatus {
    with_queue(queue, |q| {
        let n = q.cancel_pending()? as u64;
        if count.is_null() {
            return Ok(());
        }
        // SAFETY: non-null `count` is valid for writes by contract.
        unsafe { write(count, n, "count") }
    })
}
