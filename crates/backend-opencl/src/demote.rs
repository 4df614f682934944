//! Level 2 where the OpenCL device is this machine's own CPU (POCL's `cpu` device, or any CPU
//! runtime): its "hardware queue" is this process's worker threads, so holding a deactivated
//! queue's launched work means not giving those threads the CPU.
//!
//! OpenCL has no call to hold queued commands, and on a CPU device the kernels launched before
//! a suspend run *concurrently* with the foreground (the OS time-slices both processes' worker
//! threads), so at Level 1 a suspended queue with millisecond kernels in flight still takes
//! half the CPU from the queue it was suspended for. Here, deactivating demotes every thread of
//! the process to `SCHED_IDLE` (they run only on otherwise idle CPU: weight 3 against a normal
//! thread's 1024), except xsched's own threads (named `xsched-*`: the agent that must hear the
//! resume, the launchers), the calling thread, and every thread that has taken an OpenCL
//! XQueue's launch-machine lock ([`exempt_this_thread`], called before each lock through
//! `HwQueue::before_queue_lock`), except OpenCL's callback threads: they take that lock to
//! refill (`hook.rs`) but are the device's own threads, so they are spared only while a refill
//! runs ([`spared_while`]) and demoted when it ends if the process is still held. Reactivating
//! restores each demoted thread's policy and nice value, and gives a normal policy back to
//! threads that were started while the process was demoted (they inherit `SCHED_IDLE`). The
//! lock-taking threads are spared because a resume takes that lock: demoted, one preempted
//! inside its critical section would hold the resume until the CPU fell idle (a priority
//! inversion). They need sparing only inside it, though: an application thread that submits
//! to a held queue lowers itself again when its submit returns ([`rejoin_hold`]) and is raised
//! at its next lock, so a framework's host code between launches (tinygrad's Python) does not
//! take the CPU from the process the hold is for. A thread that takes it while demoted leaves `SCHED_IDLE` before it takes any
//! lock, the census's included. Left: a device thread completing a command records it under
//! the queue's tracker lock, which a resume also takes briefly, and a callback thread demoted
//! at the end of its refill releases the census lock (which a resume takes) at `SCHED_IDLE`;
//! both windows last at most a few hundred nanoseconds, not a launch. Launched work is neither
//! lost nor cancelled: it finishes when the CPU is free, which is what a Level-2 hold means for
//! a queue.
//!
//! Threads belong to the process, not to a queue, so the demotion is process-wide and counted:
//! the threads are demoted while at least one CPU-device queue is deactivated and none is
//! active, and restored as soon as one is active again.
//!
//! Restoring a thread from `SCHED_IDLE` to its nice value is a privileged change unless
//! `RLIMIT_NICE` allows it (Linux `sched(7)`), so the level is offered only where this process
//! holds `CAP_SYS_NICE` or a large enough `RLIMIT_NICE` (checked once); elsewhere the backend
//! stays at Level 1, saying why in its capability table.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use xsched_runtime::stamps::{Stamp, stamp};

/// Whether the process's threads are demoted now (read without the census lock by a thread
/// that must leave `SCHED_IDLE` before it takes any lock).
static DEMOTED: AtomicBool = AtomicBool::new(false);

/// One thread demoted by us, with what to give back.
#[derive(Clone, Copy, Debug)]
struct Demoted {
    tid: libc::pid_t,
    policy: libc::c_int,
    nice: libc::c_int,
}

/// The process's CPU-device queues and the threads demoted for them.
#[derive(Debug, Default)]
struct Census {
    active: usize,
    held: usize,
    demoted: Vec<Demoted>,
    /// Threads already at `SCHED_IDLE` when the demotion began: the application's own choice,
    /// left as it is.
    already_idle: Vec<libc::pid_t>,
    /// Live threads that take our queues' locks: never demoted.
    exempt: Vec<libc::pid_t>,
}

static CENSUS: Mutex<Census> = Mutex::new(Census {
    active: 0,
    held: 0,
    demoted: Vec::new(),
    already_idle: Vec::new(),
    exempt: Vec::new(),
});

fn census() -> std::sync::MutexGuard<'static, Census> {
    // Every critical section leaves the census consistent; a panic elsewhere cannot break it.
    CENSUS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether this process may undo a demotion, so Level 2 can be offered: `CAP_SYS_NICE` in
/// its effective set, or an `RLIMIT_NICE` that lets it return to its current nice value.
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| cap_sys_nice() || rlimit_allows(current_nice()))
}

const CAP_SYS_NICE: u32 = 23;

fn cap_sys_nice() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
            u64::from_str_radix(hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

fn current_nice() -> libc::c_int {
    // SAFETY: getpriority has no memory arguments; 0 means the calling process.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

fn rlimit_allows(nice: libc::c_int) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the duration of the call.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut limit) } == 0;
    // Linux: a thread may set nice `n` if `20 - n <= RLIMIT_NICE` (sched(7), setpriority(2)).
    let needed = libc::rlim_t::try_from(20 - nice.clamp(-20, 19)).unwrap_or(libc::rlim_t::MAX);
    ok && limit.rlim_cur >= needed
}

/// Whether the process's threads are demoted now (a Level-2 hold).
pub(crate) fn demoted() -> bool {
    DEMOTED.load(Ordering::Acquire)
}

/// A CPU-device queue now exists (active).
pub(crate) fn queue_created() {
    census().active += 1;
}

/// A CPU-device queue is gone; `held` says whether it was deactivated.
pub(crate) fn queue_dropped(held: bool) {
    let mut c = census();
    if held {
        c.held = c.held.saturating_sub(1);
    } else {
        c.active = c.active.saturating_sub(1);
    }
    settle(&mut c);
}

/// A CPU-device queue was deactivated.
pub(crate) fn hold() {
    let mut c = census();
    c.active = c.active.saturating_sub(1);
    c.held += 1;
    settle(&mut c);
}

/// A CPU-device queue was reactivated.
pub(crate) fn release() {
    let mut c = census();
    c.held = c.held.saturating_sub(1);
    c.active += 1;
    settle(&mut c);
}

/// Demote or restore so that the threads are demoted exactly while something is held and
/// nothing is active.
fn settle(c: &mut Census) {
    let want = c.held > 0 && c.active == 0;
    if want && !DEMOTED.load(Ordering::Acquire) {
        (c.demoted, c.already_idle) = demote_threads(&c.exempt);
        DEMOTED.store(true, Ordering::Release);
        stamp(Stamp::Demoted);
    } else if !want && DEMOTED.load(Ordering::Acquire) {
        for d in c.demoted.drain(..) {
            restore(d);
        }
        normalize_inherited(&c.already_idle);
        c.already_idle.clear();
        DEMOTED.store(false, Ordering::Release);
        stamp(Stamp::Restored);
    }
}

/// This thread's exemption, taken on its first submit and given back when it exits (so a
/// reused thread id is not spared by mistake and the list stays as long as the live threads).
struct Exemption(std::cell::Cell<Option<libc::pid_t>>);

impl Drop for Exemption {
    fn drop(&mut self) {
        if let Some(tid) = self.0.get() {
            census().exempt.retain(|&t| t != tid);
        }
    }
}

thread_local! {
    static EXEMPTION: Exemption = const { Exemption(std::cell::Cell::new(None)) };
    /// Whether this exempt thread lowered itself after a submit ([`rejoin_hold`]) and may
    /// still be in the census's demoted list.
    static REJOINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keep the calling thread at its own priority from now on (see the module docs); undoes its
/// demotion if the process is demoted now. After the first call on a thread, two thread-local
/// reads unless it rejoined a hold since its last lock.
pub(crate) fn exempt_this_thread() {
    // A thread being torn down has no exemption left to take; it submits nothing more.
    let _ = EXEMPTION.try_with(|e| match e.0.get() {
        Some(tid) => {
            if REJOINED.try_with(|r| r.replace(false)).unwrap_or(false) {
                leave_hold(tid);
            }
        }
        None => {
            let tid = gettid();
            e.0.set(Some(tid));
            spare(tid);
        }
    });
}

/// After a submit, on the submitting (exempt) thread: while the process is held, its own host
/// work between launches (a framework's Python, say) runs on idle CPU like the device's
/// threads, until its next lock ([`exempt_this_thread`]) or the release, whichever is first.
/// Exempt threads are spared only inside the lock, where a demoted holder would stall the
/// resume; outside it they hold nothing a resume needs. One atomic read when not held.
pub(crate) fn rejoin_hold() {
    if !DEMOTED.load(Ordering::Acquire) {
        return;
    }
    let Some(tid) = EXEMPTION.try_with(|e| e.0.get()).ok().flatten() else {
        return; // never took a lock: demoted with the rest, or not ours
    };
    let mut c = census();
    if !DEMOTED.load(Ordering::Acquire) || c.demoted.iter().any(|d| d.tid == tid) {
        return;
    }
    c.demoted.reserve(1);
    // Last, as in `spared_while`: at SCHED_IDLE this thread only releases the census lock.
    if let Some(d) = demote(tid) {
        c.demoted.push(d);
        let _ = REJOINED.try_with(|r| r.set(true));
    }
}

/// Undo [`rejoin_hold`] for `tid` (the caller), unless the release did already.
fn leave_hold(tid: libc::pid_t) {
    // Out of SCHED_IDLE first, so that this thread never holds the census lock demoted.
    if policy_of(tid) == libc::SCHED_IDLE {
        set_policy(tid, libc::SCHED_OTHER);
    }
    let mut c = census();
    if let Some(i) = c.demoted.iter().position(|d| d.tid == tid) {
        restore(c.demoted.swap_remove(i));
    }
}

/// Run `f` (a refill on a device thread, which takes a queue's lock) at the thread's own
/// priority, as if exempt, then hand the thread back to the hold if one is on by then.
pub(crate) fn spared_while<R>(f: impl FnOnce() -> R) -> R {
    if EXEMPTION.try_with(|e| e.0.get().is_some()).unwrap_or(true) {
        return f(); // exempt for good (or being torn down)
    }
    /// Ends the sparing, a panic included.
    struct Spared(libc::pid_t);
    impl Drop for Spared {
        fn drop(&mut self) {
            let mut c = census();
            c.exempt.retain(|&t| t != self.0);
            // Last, so that at SCHED_IDLE the thread only releases the census lock; `demote`
            // leaves a thread that was at SCHED_IDLE before the hold as it is.
            if DEMOTED.load(Ordering::Acquire) {
                c.demoted.reserve(1);
                if let Some(d) = demote(self.0) {
                    c.demoted.push(d);
                }
            }
        }
    }
    let spared = Spared(gettid());
    spare(spared.0);
    f()
}

/// Exempt the calling thread `tid` and undo its demotion, if any.
fn spare(tid: libc::pid_t) {
    // Out of SCHED_IDLE first, so that this thread never holds the census lock demoted.
    let left_idle = DEMOTED.load(Ordering::Acquire) && policy_of(tid) == libc::SCHED_IDLE;
    if left_idle {
        set_policy(tid, libc::SCHED_OTHER);
    }
    let mut c = census();
    c.exempt.push(tid);
    if let Some(i) = c.demoted.iter().position(|d| d.tid == tid) {
        restore(c.demoted.swap_remove(i));
    } else if left_idle && c.already_idle.contains(&tid) {
        set_policy(tid, libc::SCHED_IDLE); // the application's own choice
    }
}

fn policy_of(tid: libc::pid_t) -> libc::c_int {
    // SAFETY: no memory arguments; a vanished tid returns -1.
    unsafe { libc::sched_getscheduler(tid) }
}

/// Set a non-real-time policy (the nice value is kept); false if it could not be set.
fn set_policy(tid: libc::pid_t, policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the duration of the call.
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}

/// This process's thread ids, or `None` (with a warning) when they cannot be listed.
fn threads() -> Option<Vec<(libc::pid_t, std::path::PathBuf)>> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        tracing::warn!("cannot list this process's threads; Level 2 cannot hold or release them");
        return None;
    };
    Some(
        tasks
            .flatten()
            .filter_map(|t| {
                let tid = t.file_name().to_str()?.parse::<libc::pid_t>().ok()?;
                Some((tid, t.path()))
            })
            .collect(),
    )
}

/// Give a normal policy back to every thread at `SCHED_IDLE` that was not so before the
/// demotion: threads started by demoted ones inherited it and are in no list.
fn normalize_inherited(already_idle: &[libc::pid_t]) {
    for (tid, _) in threads().unwrap_or_default() {
        if policy_of(tid) == libc::SCHED_IDLE && !already_idle.contains(&tid) {
            set_policy(tid, libc::SCHED_OTHER);
        }
    }
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Demote every thread of the process but xsched's, the exempt ones and the caller; what was
/// demoted, and which threads were at `SCHED_IDLE` already.
fn demote_threads(exempt: &[libc::pid_t]) -> (Vec<Demoted>, Vec<libc::pid_t>) {
    let me = gettid();
    let (mut demoted, mut already_idle) = (Vec::new(), Vec::new());
    for (tid, path) in threads().unwrap_or_default() {
        let ours = std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|name| name.starts_with("xsched-"));
        if tid == me || ours || exempt.contains(&tid) {
            continue;
        }
        if policy_of(tid) == libc::SCHED_IDLE {
            already_idle.push(tid);
        } else if let Some(d) = demote(tid) {
            demoted.push(d);
        }
    }
    (demoted, already_idle)
}

/// Demote one normal or batch thread to `SCHED_IDLE`; `None` when it is not one (real-time,
/// already idle) or is gone.
fn demote(tid: libc::pid_t) -> Option<Demoted> {
    let policy = policy_of(tid);
    if policy != libc::SCHED_OTHER && policy != libc::SCHED_BATCH {
        return None;
    }
    // SAFETY: no memory arguments (getpriority returns the nice value of thread `tid`).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
    if !set_policy(tid, libc::SCHED_IDLE) {
        return None;
    }
    Some(Demoted { tid, policy, nice })
}

fn restore(d: Demoted) {
    // A thread that exited meanwhile fails with ESRCH.
    let back = set_policy(d.tid, d.policy)
        // SAFETY: no memory arguments.
        && unsafe { libc::setpriority(libc::PRIO_PROCESS, d.tid as libc::id_t, d.nice) } == 0;
    if !back && std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) {
        tracing::warn!(
            "cannot restore thread {} after a Level-2 hold: {}",
            d.tid,
            std::io::Error::last_os_error()
        );
    }
}
