//! Prompt control threads: the threads that carry a scheduling decision (the agent, its link
//! to the daemon, the in-process scheduler, the daemon's connection and timer threads) run at
//! the lowest real-time priority (`SCHED_FIFO` 1) while threads wait for the machine's CPUs
//! (the default), always (`XSCHED_RT_CONTROL=1`), or never (`XSCHED_RT_CONTROL=0`), as
//! [`RtControl`] reads it, where the process may use it.
//!
//! Why: a decision crosses up to four thread wake-ups between processes (application → agent
//! → daemon → the other process's agent). On a machine whose cores are busy with normal
//! threads (the device's own worker threads, on a CPU device), each wake-up waits for the
//! running thread's time slice, so the decision's tail grows longer than the foreground request
//! it should protect, and a lower nice value does not shorten it. A real-time thread preempts
//! normal ones at once.
//!
//! Why only under contention: where a CPU is free a real-time thread is woken on the CPU it
//! last ran on rather than beside its waker, and waking an idle virtual CPU costs many times
//! what the daemon's whole event → operation path takes otherwise; and where a CPU is free a
//! normal thread is not kept waiting anyway. So each control
//! thread looks, after each unit of its work ([`CpuGuard::check`]), at the machine's CPU
//! pressure (`/proc/pressure/cpu`: the time some runnable thread waited for a CPU, sampled at
//! most every [`SAMPLE_EVERY`] per process) and is real-time only while threads waited at
//! least [`CONTENDED_AT`] of the last window ([`contended`], with hysteresis; with no sample
//! of the last 400 ms to start a window from, the answer stays as it was, normal at first,
//! for a short first window of 20 ms). Busy CPUs alone do not count: two threads passing
//! messages back and forth keep both CPUs of a small machine busy but never wait, and there
//! real-time wake-ups only cost. A thread woken while its setting is stale pays one slow
//! wake-up, so every control thread looks often enough: the agent, its link and the daemon's
//! connection threads wake at least every ping (150 ms) while connected (and carry no
//! decision otherwise); the in-process scheduler and the daemon's timer thread, which could
//! sleep indefinitely, wake every [`SAMPLE_EVERY`] to look ([`CpuGuard::look_within`]).
//! Without pressure accounting (a kernel without PSI, or booted `psi=0`) the threads stay
//! normal by default, and the file is not looked for again (said once, at info level).
//!
//! "Normal" is the thread's own scheduling as it was when its guard began: its policy and nice
//! value (a process started with `nice 10` keeps 10). A thread that is real-time already is
//! left as it is.
//!
//! These threads block between messages and do a few microseconds of work per message; a
//! thread that keeps the CPU anyway (a client flooding the daemon) is dropped back to normal,
//! for good, by its [`CpuGuard`]. And a process's control threads together may use no more CPU
//! at real-time priority than one of them (20 ms per 100 ms): past that, each is normal until
//! the window ends, so that many clients flooding the daemon (one connection thread each), each
//! thread just within its own allowance, cannot take more than one could. Without the
//! privilege (`CAP_SYS_NICE` or `RLIMIT_RTPRIO` ≥ 1) the threads stay as they are.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id, thread_schedule_policy_param,
};

/// The variable that chooses when control threads are real-time ([`RtControl`]).
pub const RT_CONTROL: &str = "XSCHED_RT_CONTROL";

/// The values [`RT_CONTROL`] accepts, as an error names them.
pub const RT_CONTROL_VALUES: &str =
    "auto (the default), 1, on, true or yes (always), 0, off, false or no (never)";

/// When control threads run `SCHED_FIFO` ([`RT_CONTROL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RtControl {
    /// Never (`0`, `off`, `false`, `no`).
    Never,
    /// Always (`1`, `on`, `true`, `yes`).
    Always,
    /// While threads wait for the machine's CPUs (`auto`, empty, or unset).
    #[default]
    WhileContended,
}

/// A value of [`RT_CONTROL`] that is none of [`RT_CONTROL_VALUES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{RT_CONTROL}={value:?}: expected {RT_CONTROL_VALUES}")]
pub struct BadRtControl {
    /// The value (lossily, if it is not UTF-8).
    pub value: String,
}

impl RtControl {
    /// What `value` of [`RT_CONTROL`] (`None`: unset) asks for; case and surrounding blanks do
    /// not matter.
    pub fn parse(value: Option<&str>) -> Result<RtControl, BadRtControl> {
        let Some(value) = value else {
            return Ok(RtControl::WhileContended);
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(RtControl::WhileContended),
            "1" | "on" | "true" | "yes" => Ok(RtControl::Always),
            "0" | "off" | "false" | "no" => Ok(RtControl::Never),
            _ => Err(BadRtControl {
                value: value.to_string(),
            }),
        }
    }

    /// What the process's [`RT_CONTROL`] asks for (a value that is not UTF-8 is refused too).
    /// The runtime and the daemon call this where they read their environment, so a bad value
    /// is an error there.
    pub fn from_env() -> Result<RtControl, BadRtControl> {
        match std::env::var_os(RT_CONTROL) {
            None => RtControl::parse(None),
            Some(v) => match v.to_str() {
                Some(v) => RtControl::parse(Some(v)),
                None => Err(BadRtControl {
                    value: v.to_string_lossy().into_owned(),
                }),
            },
        }
    }

    /// [`from_env`](Self::from_env), read once per process; a bad value (already refused where
    /// the runtime or the daemon started) means [`Never`](RtControl::Never), said once.
    fn configured() -> RtControl {
        static WHEN: OnceLock<RtControl> = OnceLock::new();
        *WHEN.get_or_init(|| {
            RtControl::from_env().unwrap_or_else(|e| {
                tracing::warn!("{e}; control threads stay at normal priority");
                RtControl::Never
            })
        })
    }
}

fn make_fifo() -> bool {
    let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    match set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, fifo) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("control thread stays at normal priority: {e:?}");
            false
        }
    }
}

/// A thread's scheduling before it was made real-time, to return it to: its normal policy
/// and nice value as they were (a process started with `nice 10` stays at 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scheduling {
    policy: ThreadSchedulePolicy,
    /// Its nice value, as the `thread-priority` crate takes it for `policy`.
    priority: ThreadPriority,
}

impl Scheduling {
    /// The calling thread's, if it runs a normal policy and both can be read (`None` for a
    /// thread that is real-time already: it is left as it is).
    fn of_this_thread() -> Option<Scheduling> {
        let (policy, _) = thread_schedule_policy_param(thread_native_id()).ok()?;
        let ThreadSchedulePolicy::Normal(_) = policy else {
            return None;
        };
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        let priority = nice_priority(nice_in_stat(&stat)?, policy)?;
        Some(Scheduling { policy, priority })
    }

    /// Return the calling thread to it. Setting the nice value it already has needs no
    /// privilege, so this works wherever making the thread real-time did.
    fn restore(self) -> Result<(), thread_priority::Error> {
        set_thread_priority_and_policy(thread_native_id(), self.priority, self.policy)
    }
}

/// A thread's nice value: field 19 of its `/proc/…/stat` (after the parenthesized name, which
/// may hold anything).
fn nice_in_stat(stat: &str) -> Option<i32> {
    let fields = &stat[stat.rfind(')')? + 1..];
    fields.split_whitespace().nth(19 - 3)?.parse().ok()
}

/// The priority that the `thread-priority` crate turns into nice value `nice` for `policy` (it
/// takes nice values only through its portable 0–99 scale).
fn nice_priority(nice: i32, policy: ThreadSchedulePolicy) -> Option<ThreadPriority> {
    (0..=u8::MAX)
        .filter_map(|p| ThreadPriorityValue::try_from(p).ok())
        .map(ThreadPriority::Crossplatform)
        .find(|p| p.to_posix(policy).is_ok_and(|n| n == nice))
}

/// How often a process samples the machine's CPU pressure, at most.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The first window of a process, or after a stale sample: short, so that a change is seen
/// soon (until then the answer stays as it was: normal, in a process's first window).
const FIRST_WINDOW: Duration = Duration::from_millis(20);

/// A sample older than this is not used as the start of a window (see [`next`]).
const STALE_AFTER: Duration = Duration::from_millis(400);

/// Contended: some runnable thread waited for a CPU at least this share of the window.
pub const CONTENDED_AT: f64 = 0.20;

/// No longer contended once threads waited less than this share (hysteresis).
const QUIET_BELOW: f64 = 0.05;

/// Whether the CPUs count as contended after a window of `window_us` in which some runnable
/// thread waited for a CPU `stalled_us`, given whether they did before: from [`CONTENDED_AT`]
/// of the window they are, below [`QUIET_BELOW`] they are not, in between they stay as they
/// were. An empty window changes nothing.
pub fn contended(before: bool, stalled_us: u64, window_us: u64) -> bool {
    if window_us == 0 {
        return before;
    }
    let share = stalled_us as f64 / window_us as f64;
    if share >= CONTENDED_AT {
        true
    } else if share < QUIET_BELOW {
        false
    } else {
        before
    }
}

/// The machine's total time (µs) that some runnable thread waited for a CPU, or `None` without
/// pressure accounting.
fn cpu_stall_us() -> Option<u64> {
    parse_pressure(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// The `total=` of the `some` line of a pressure file.
fn parse_pressure(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// A look at the machine's CPU pressure, which starts a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sample {
    /// When (the process's clock).
    at: Duration,
    /// The machine's stall total then (µs).
    stall_us: u64,
    /// How long the window it starts lasts at least.
    window: Duration,
}

/// Whether a look at `now` samples the machine: there is no sample yet, or its window is over.
fn due(last: Option<Sample>, now: Duration) -> bool {
    last.is_none_or(|s| now.saturating_sub(s.at) >= s.window)
}

/// What a sample of `stall_us` taken at `now` says after `last`, given whether the CPUs were
/// contended `before`: whether they are now, and the sample that starts the next window. With
/// no recent sample to end a window with (the process's first look, or a last one older than
/// [`STALE_AFTER`], whose window would average over a past that may have been quiet), the
/// answer stays as it was and a short first window starts.
fn next(last: Option<Sample>, now: Duration, stall_us: u64, before: bool) -> (bool, Sample) {
    let fresh = last.filter(|s| now.saturating_sub(s.at) <= STALE_AFTER);
    let (busy, window) = match fresh {
        Some(s) => {
            let window_us = u64::try_from(now.saturating_sub(s.at).as_micros()).unwrap_or(u64::MAX);
            let stalled_us = stall_us.saturating_sub(s.stall_us);
            (contended(before, stalled_us, window_us), SAMPLE_EVERY)
        }
        None => (before, FIRST_WINDOW),
    };
    let sample = Sample {
        at: now,
        stall_us,
        window,
    };
    (busy, sample)
}

/// A process's view of the machine, shared by its control threads: the last sample and its
/// answer. Plain atomics, no lock: the thread that wins `sampling` samples, the others read the
/// last answer, and a forked child whose parent was sampling at the fork can start again
/// ([`after_fork_in_child`]).
#[derive(Debug)]
struct Machine {
    /// Held by the thread sampling now.
    sampling: AtomicBool,
    /// The last [`Sample`]'s fields (`window_ns` 0: none yet); only the sampling thread uses
    /// them.
    at_ns: AtomicU64,
    stall_us: AtomicU64,
    window_ns: AtomicU64,
    /// The last answer.
    contended: AtomicBool,
    /// No pressure accounting here: never sampled again.
    no_psi: AtomicBool,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Machine {
    const fn new() -> Machine {
        Machine {
            sampling: AtomicBool::new(false),
            at_ns: AtomicU64::new(0),
            stall_us: AtomicU64::new(0),
            window_ns: AtomicU64::new(0),
            contended: AtomicBool::new(false),
            no_psi: AtomicBool::new(false),
        }
    }

    fn last(&self) -> Option<Sample> {
        let window = self.window_ns.load(Ordering::Relaxed);
        (window > 0).then(|| Sample {
            at: Duration::from_nanos(self.at_ns.load(Ordering::Relaxed)),
            stall_us: self.stall_us.load(Ordering::Relaxed),
            window: Duration::from_nanos(window),
        })
    }

    fn keep(&self, s: Sample) {
        self.at_ns.store(ns(s.at), Ordering::Relaxed);
        self.stall_us.store(s.stall_us, Ordering::Relaxed);
        self.window_ns.store(ns(s.window).max(1), Ordering::Relaxed);
    }

    /// Whether threads wait for the machine's CPUs at `now`, sampled (with `read`, the stall
    /// total) at most once a window per process. Without pressure accounting the answer is no,
    /// and the file is not read again (said once).
    fn contended(&self, now: Duration, read: impl FnOnce() -> Option<u64>) -> bool {
        if self.no_psi.load(Ordering::Relaxed) {
            return false;
        }
        // Plain loads first: most checks fall inside the window and need not touch the flag
        // every control thread shares.
        if !due(self.last(), now) {
            return self.contended.load(Ordering::Relaxed);
        }
        if self
            .sampling
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let last = self.last();
            if due(last, now) {
                match read() {
                    Some(stall_us) => {
                        let before = self.contended.load(Ordering::Relaxed);
                        let (busy, sample) = next(last, now, stall_us, before);
                        self.contended.store(busy, Ordering::Relaxed);
                        self.keep(sample);
                    }
                    None => {
                        self.no_psi.store(true, Ordering::Relaxed);
                        tracing::info!(
                            "{RT_CONTROL}=auto: no /proc/pressure/cpu, control threads stay normal"
                        );
                    }
                }
            }
            self.sampling.store(false, Ordering::Release);
        }
        self.contended.load(Ordering::Relaxed)
    }

    /// Whether sampling can tell anything (false once pressure accounting proved absent).
    fn can_tell(&self) -> bool {
        !self.no_psi.load(Ordering::Relaxed)
    }
}

/// How much CPU a prompt thread may use per window before it loses real-time priority.
const CPU_PER_WINDOW: Duration = Duration::from_millis(20);

/// The window [`CPU_PER_WINDOW`] is counted over (20 %).
const WINDOW: Duration = Duration::from_millis(100);

/// How much CPU a process's control threads may use together at real-time priority per
/// [`WINDOW`]: as much as one of them. Past it each goes normal at its next check until the
/// window ends, so that many threads each under its own allowance (the daemon's connection
/// threads of many flooding clients) cannot take more than one thread may.
const PROCESS_CPU_PER_WINDOW: Duration = CPU_PER_WINDOW;

/// Bits of a [`Budget`] word that count µs (the rest number the window).
const USED_BITS: u32 = 40;
const USED_MASK: u64 = (1 << USED_BITS) - 1;

/// The CPU a process's control threads used at real-time priority in the current [`WINDOW`],
/// in one word (lock-free): the window's number (its low 24 bits) above 40 bits of µs.
#[derive(Debug)]
struct Budget(AtomicU64);

/// The number of the [`WINDOW`] that `now` (the process's clock) falls in.
fn window_of(now: Duration) -> u64 {
    u64::try_from(now.as_nanos() / WINDOW.as_nanos()).unwrap_or(u64::MAX)
}

impl Budget {
    const fn new() -> Budget {
        Budget(AtomicU64::new(0))
    }

    fn tag(window: u64) -> u64 {
        window & (u64::MAX >> USED_BITS)
    }

    /// Count `used` in window `window` (a new window starts from zero); its total now.
    fn spend(&self, window: u64, used: Duration) -> Duration {
        let tag = Budget::tag(window);
        let add = u64::try_from(used.as_micros()).unwrap_or(USED_MASK);
        let mut total = 0;
        // The closure always returns Some: the update cannot fail.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let before = if word >> USED_BITS == tag {
                    word & USED_MASK
                } else {
                    0
                };
                total = before.saturating_add(add).min(USED_MASK);
                Some(tag << USED_BITS | total)
            });
        Duration::from_micros(total)
    }

    /// What window `window` used so far.
    fn spent(&self, window: u64) -> Duration {
        let word = self.0.load(Ordering::Relaxed);
        if word >> USED_BITS == Budget::tag(window) {
            Duration::from_micros(word & USED_MASK)
        } else {
            Duration::ZERO
        }
    }
}

/// What a process's control threads share.
#[derive(Debug)]
struct Process {
    machine: Machine,
    budget: Budget,
    /// That the threads went over [`PROCESS_CPU_PER_WINDOW`] was logged.
    said_over: AtomicBool,
}

impl Process {
    const fn new() -> Process {
        Process {
            machine: Machine::new(),
            budget: Budget::new(),
            said_over: AtomicBool::new(false),
        }
    }
}

/// This process's.
static PROCESS: Process = Process::new();

/// For a forked child (from `crate::fork::after_fork_in_child`): a thread of the parent that
/// was sampling at the fork does not exist here, so let the child's threads sample.
/// Async-signal-safe (one atomic store).
pub(crate) fn after_fork_in_child() {
    PROCESS.machine.sampling.store(false, Ordering::Release);
}

/// A control thread's priority: real-time when [`RT_CONTROL`] says so, else the thread's own
/// scheduling (its policy and nice value when guarding began), and dropped back to that, for
/// good, once it used more than 20 % of a CPU over a 100 ms window: whatever made it busy (a
/// flood from one client) then competes like any other thread instead of taking a core from
/// everyone. The process's guards together allow no more: past that, each thread is normal
/// until the window ends.
#[derive(Debug)]
pub struct CpuGuard {
    when: RtControl,
    /// What the process's control threads share (their own, in tests).
    process: &'static Process,
    /// The thread's scheduling when guarding began, which "normal" returns it to.
    original: Option<Scheduling>,
    prompt: bool,
    /// The guard tripped, real-time is not permitted, or the thread's own scheduling is
    /// unknown (or real-time already): left as it is from now on.
    dropped: bool,
    /// A failure to return the thread to its scheduling was logged.
    said_restore: bool,
    window_start: Duration,
    cpu_at_start: Duration,
    /// The thread's CPU time when its real-time use was last counted in the process's budget.
    cpu_seen: Duration,
}

fn wall() -> Duration {
    Duration::from_nanos(crate::clock::now().0)
}

fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(Duration::ZERO, Duration::from)
}

impl CpuGuard {
    /// Start guarding the calling control thread, real-time now if [`RT_CONTROL`] asks for
    /// it always, or by default if threads wait for the machine's CPUs.
    pub fn start() -> CpuGuard {
        let mut guard = CpuGuard::guarding(RtControl::configured(), &PROCESS);
        guard.check();
        guard
    }

    fn guarding(when: RtControl, process: &'static Process) -> CpuGuard {
        let original = Scheduling::of_this_thread();
        let cpu = thread_cpu();
        let mut guard = CpuGuard {
            when,
            process,
            original,
            prompt: false,
            dropped: original.is_none(),
            said_restore: false,
            window_start: wall(),
            cpu_at_start: cpu,
            cpu_seen: cpu,
        };
        if when == RtControl::Always {
            let over = process.budget.spent(window_of(wall())) > PROCESS_CPU_PER_WINDOW;
            guard.set_prompt(!over);
        }
        guard
    }

    /// Whether the thread is real-time now.
    pub fn is_prompt(&self) -> bool {
        self.prompt
    }

    /// Become real-time or normal; a thread that may not be real-time stays as it is, and is
    /// not asked again.
    fn set_prompt(&mut self, prompt: bool) {
        if prompt == self.prompt || self.dropped {
            return;
        }
        if prompt {
            self.prompt = make_fifo();
            // Not permitted (no CAP_SYS_NICE or RLIMIT_RTPRIO): stop asking.
            self.dropped = !self.prompt;
            self.window_start = wall();
            self.cpu_at_start = thread_cpu();
            self.cpu_seen = self.cpu_at_start;
        } else {
            self.prompt = false;
            let restored = self.original.map(Scheduling::restore);
            if let Some(Err(e)) = restored
                && !std::mem::replace(&mut self.said_restore, true)
            {
                tracing::warn!(
                    "cannot return a control thread to its scheduling ({:?}): {e:?}",
                    self.original
                );
            }
        }
    }

    /// How long the thread may block before it should [`check`](Self::check) again so as to
    /// follow the machine: [`SAMPLE_EVERY`] by default, `None` where it need not (real-time
    /// always or never, dropped back for good, or no pressure accounting). A thread that blocks
    /// with no other reason to wake (the in-process scheduler, the daemon's timer thread)
    /// bounds its wait with this, so that its setting is never older than that when it wakes.
    pub fn look_within(&self) -> Option<Duration> {
        let follows = self.when == RtControl::WhileContended && !self.dropped;
        (follows && self.process.machine.can_tell()).then_some(SAMPLE_EVERY)
    }

    /// Call after each unit of work (a message handled, a wake-up): checks the thread's CPU
    /// use, and whether it should be real-time now.
    pub fn check(&mut self) {
        // A thread that is never real-time (dropped back for good, or `never`) has nothing to
        // count and nothing to decide: no clock read for it.
        if self.dropped || self.when == RtControl::Never {
            return;
        }
        self.check_at(wall(), thread_cpu);
    }

    /// [`check`](Self::check) at `now` (the process's clock), the thread having used `cpu()`
    /// (read only while it is real-time: the thread's CPU clock is a system call).
    fn check_at(&mut self, now: Duration, cpu: impl FnOnce() -> Duration) {
        let over = self.guard_cpu(now, cpu);
        if self.dropped {
            return;
        }
        let wanted = match self.when {
            RtControl::Always => true,
            RtControl::Never => false,
            RtControl::WhileContended => self.process.machine.contended(now, cpu_stall_us),
        };
        self.set_prompt(wanted && !over);
    }

    /// Count the CPU the thread used at real-time priority since it was last counted: against
    /// its own allowance (past it: normal for good) and the process's; returns whether the
    /// process's is spent for the window `now` falls in.
    fn guard_cpu(&mut self, now: Duration, cpu: impl FnOnce() -> Duration) -> bool {
        let budget = &self.process.budget;
        let window = window_of(now);
        if !self.prompt {
            return budget.spent(window) > PROCESS_CPU_PER_WINDOW;
        }
        let cpu = cpu();
        let spent = budget.spend(window, cpu.saturating_sub(self.cpu_seen));
        self.cpu_seen = cpu;
        if now.saturating_sub(self.window_start) < WINDOW {
            let used = cpu.saturating_sub(self.cpu_at_start);
            if used > CPU_PER_WINDOW {
                self.set_prompt(false);
                self.dropped = true;
                tracing::warn!(
                    "a control thread used {} ms of CPU in under {} ms; it continues at \
                     normal priority",
                    used.as_millis(),
                    WINDOW.as_millis()
                );
            }
        } else {
            self.window_start = now;
            self.cpu_at_start = cpu;
        }
        let over = spent > PROCESS_CPU_PER_WINDOW;
        if over && !self.process.said_over.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "control threads used over {} ms of CPU at real-time priority in {} ms; each \
                 is normal until the window ends, whenever that happens (said once)",
                PROCESS_CPU_PER_WINDOW.as_millis(),
                WINDOW.as_millis()
            );
        }
        over
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_priority::NormalThreadSchedulePolicy;

    /// The calling thread's scheduling policy (`/proc/thread-self/stat` field 41).
    fn policy() -> u32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
        let rest = &stat[stat.rfind(')').expect("name") + 2..];
        rest.split(' ')
            .nth(41 - 3)
            .expect("field")
            .parse()
            .expect("number")
    }

    const SCHED_OTHER: u32 = 0;
    const SCHED_FIFO: u32 = 1;

    #[test]
    fn a_prompt_thread_runs_fifo_and_a_busy_one_drops_back_to_normal_for_good() {
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(RtControl::Always, &PROCESS);
            if !guard.is_prompt() {
                eprintln!(
                    "skipped: no privilege for SCHED_FIFO here (CAP_SYS_NICE, RLIMIT_RTPRIO)"
                );
                assert_eq!(policy(), SCHED_OTHER);
                return;
            }
            assert_eq!(policy(), SCHED_FIFO);
            guard.check();
            assert!(guard.is_prompt(), "a thread that did nothing stays prompt");
            // Spin well past the CPU allowance, within one window.
            let start = std::time::Instant::now();
            while start.elapsed() < CPU_PER_WINDOW * 2 {
                std::hint::spin_loop();
            }
            guard.check();
            assert!(!guard.is_prompt());
            assert_eq!(policy(), SCHED_OTHER, "back to normal priority");
            guard.set_prompt(true);
            assert_eq!(policy(), SCHED_OTHER, "a dropped thread stays normal");
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_thread_switches_between_real_time_and_normal() {
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(RtControl::WhileContended, &PROCESS);
            assert!(!guard.is_prompt(), "normal until it looks at the machine");
            guard.set_prompt(true);
            if !guard.is_prompt() {
                assert!(guard.dropped, "not permitted: not asked again");
                eprintln!("skipped: no privilege for SCHED_FIFO here");
                return;
            }
            assert_eq!(policy(), SCHED_FIFO, "real-time while contended");
            guard.set_prompt(false);
            assert_eq!(policy(), SCHED_OTHER, "normal again once quiet");
            guard.set_prompt(true);
            assert_eq!(policy(), SCHED_FIFO, "and real-time again");
            guard.set_prompt(false);
            let mut never = CpuGuard::guarding(RtControl::Never, &PROCESS);
            never.check();
            assert!(!never.is_prompt());
            assert_eq!(policy(), SCHED_OTHER);
        })
        .join()
        .expect("thread");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_sample_ends_a_window_and_a_stale_one_keeps_the_answer() {
        let t0 = Duration::from_secs(1);
        assert!(due(None, t0), "no sample yet");
        let (busy, first) = next(None, t0, 1_000, false);
        assert!(!busy, "the first look: no window to judge by");
        let want = Sample {
            at: t0,
            stall_us: 1_000,
            window: FIRST_WINDOW,
        };
        assert_eq!(first, want, "a short first window");
        assert!(
            !due(Some(first), t0 + ms(19)),
            "not again inside the window"
        );
        assert!(due(Some(first), t0 + FIRST_WINDOW));
        // 5 ms of 20 waited (25 %): contended; windows of SAMPLE_EVERY from now on.
        let (busy, second) = next(Some(first), t0 + ms(20), 6_000, false);
        assert!(busy);
        assert_eq!(second.window, SAMPLE_EVERY);
        assert!(!due(Some(second), second.at + ms(99)));
        // 1 ms of 100 waited: quiet again.
        let (busy, _) = next(Some(second), second.at + ms(100), 7_000, true);
        assert!(!busy);
        // Over STALE_AFTER since the last sample: the answer stays as it was, whichever it
        // was, however much was waited meanwhile, and a short window starts.
        let late = second.at + STALE_AFTER + ms(1);
        for before in [false, true] {
            let (busy, sample) = next(Some(second), late, 10_000_000, before);
            assert_eq!(busy, before);
            assert_eq!(sample.window, FIRST_WINDOW);
        }
        let (busy, _) = next(Some(second), second.at + STALE_AFTER, 6_000, true);
        assert!(!busy, "a window of exactly STALE_AFTER still counts");
    }

    #[test]
    fn the_machine_is_read_once_a_window_and_never_again_without_pressure_accounting() {
        static MACHINE: Machine = Machine::new();
        let reads = &std::cell::Cell::new(0);
        let read = |stall_us: Option<u64>| {
            move || {
                reads.set(reads.get() + 1);
                stall_us
            }
        };
        let t0 = Duration::from_secs(1);
        assert!(!MACHINE.contended(t0, read(Some(0))));
        assert!(
            !MACHINE.contended(t0 + ms(5), read(Some(0))),
            "inside the window"
        );
        assert_eq!(reads.get(), 1);
        assert!(
            MACHINE.contended(t0 + ms(20), read(Some(5_000))),
            "25 % waited"
        );
        assert!(
            MACHINE.contended(t0 + ms(30), read(Some(0))),
            "the last answer"
        );
        assert_eq!(reads.get(), 2);

        static WITHOUT: Machine = Machine::new();
        reads.set(0);
        assert!(!WITHOUT.contended(t0, read(None)));
        assert!(!WITHOUT.can_tell());
        assert!(!WITHOUT.contended(t0 + ms(500), read(Some(0))));
        assert_eq!(reads.get(), 1, "no pressure file: not looked for again");
    }

    #[test]
    fn only_a_thread_that_follows_the_machine_looks_at_it() {
        static WATCHED: Process = Process::new();
        // On threads of their own: a guard may make its thread real-time.
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(RtControl::WhileContended, &WATCHED);
            guard.dropped = true;
            guard.check();
            assert_eq!(
                WATCHED.machine.last(),
                None,
                "a thread that may never be real-time"
            );
            assert_eq!(guard.look_within(), None);
            for when in [RtControl::Always, RtControl::Never] {
                assert_eq!(CpuGuard::guarding(when, &WATCHED).look_within(), None);
            }
        })
        .join()
        .expect("thread");
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(RtControl::WhileContended, &WATCHED);
            guard.check();
            if WATCHED.machine.can_tell() {
                assert!(WATCHED.machine.last().is_some(), "looked");
                if !guard.dropped {
                    assert_eq!(guard.look_within(), Some(SAMPLE_EVERY));
                }
            } else {
                assert_eq!(guard.look_within(), None, "no pressure accounting here");
            }
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn the_budget_adds_up_every_thread_of_a_window() {
        let budget = Budget::new();
        assert_eq!(budget.spent(7), Duration::ZERO);
        assert_eq!(budget.spend(7, ms(12)), ms(12));
        assert_eq!(
            budget.spend(7, ms(12)),
            ms(24),
            "another thread, the same window"
        );
        assert_eq!(budget.spent(7), ms(24));
        assert_eq!(budget.spent(8), Duration::ZERO, "the next window");
        assert_eq!(budget.spend(8, ms(1)), ms(1), "starts from zero");
        assert_eq!(window_of(Duration::from_secs(10) + ms(99)), 100);
        assert_eq!(window_of(Duration::from_secs(10) + ms(100)), 101);
    }

    #[test]
    fn threads_each_within_their_allowance_go_normal_once_the_process_is_over_its_own() {
        static SHARED: Process = Process::new();
        std::thread::spawn(|| {
            let t0 = Duration::from_secs(10);
            let cpu0 = Duration::from_secs(1);
            // Two control threads' guards, real-time since t0 (pretended, so that this runs
            // without the privilege; each goes normal by restoring this thread's scheduling).
            let guard = || {
                let mut g = CpuGuard::guarding(RtControl::Always, &SHARED);
                // This thread's scheduling cannot be read here: no guard to pretend with.
                g.original?;
                (g.prompt, g.dropped) = (true, false);
                (g.window_start, g.cpu_at_start, g.cpu_seen) = (t0, cpu0, cpu0);
                Some(g)
            };
            let (Some(mut a), Some(mut b)) = (guard(), guard()) else {
                eprintln!("skipped: this thread's scheduling cannot be read here");
                return;
            };
            a.check_at(t0 + ms(1), || cpu0 + ms(12));
            assert!(a.is_prompt(), "12 ms of the process's 20");
            b.check_at(t0 + ms(2), || cpu0 + ms(12));
            assert!(!b.is_prompt(), "24 ms: the process is over");
            assert!(
                !b.dropped,
                "not for good: b stayed within its own allowance"
            );
            a.check_at(t0 + ms(3), || cpu0 + ms(12));
            assert!(!a.is_prompt(), "every thread goes normal");
            assert!(!a.dropped);
            assert!(
                !b.guard_cpu(t0 + WINDOW, || cpu0 + ms(12)),
                "the next window allows real-time again"
            );
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn every_nice_value_can_be_set_and_read_back() {
        let other = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
        for nice in -20..=19 {
            let p = nice_priority(nice, other).unwrap_or_else(|| panic!("nice {nice}"));
            assert_eq!(p.to_posix(other).ok(), Some(nice));
        }
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        assert!(nice_priority(0, idle).is_some());
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 30 10 1 0 7 0 0";
        assert_eq!(nice_in_stat(stat), Some(10), "field 19, after the name");
        assert_eq!(nice_in_stat("42 (x) S 1"), None);
    }

    #[test]
    fn a_thread_returns_to_its_own_nice_value_not_to_nice_0() {
        std::thread::spawn(|| {
            let other = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
            let nice_5 = nice_priority(5, other).expect("nice 5");
            // Lowering one's own priority needs no privilege.
            set_thread_priority_and_policy(thread_native_id(), nice_5, other).expect("nice 5");
            let nice =
                || nice_in_stat(&std::fs::read_to_string("/proc/thread-self/stat").expect("stat"));
            assert_eq!(nice(), Some(5));
            let mut guard = CpuGuard::guarding(RtControl::Always, &PROCESS);
            if !guard.is_prompt() {
                eprintln!("skipped: no privilege for SCHED_FIFO here");
                return;
            }
            guard.set_prompt(false);
            assert_eq!(policy(), SCHED_OTHER);
            assert_eq!(nice(), Some(5), "the nice value it had");
            assert!(!guard.said_restore, "restored without a warning");
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn contended_means_threads_waited_for_a_cpu_with_hysteresis() {
        // A 100 ms window, in µs.
        assert!(
            contended(false, 20_000, 100_000),
            "waited 20 % of the window"
        );
        assert!(!contended(false, 19_000, 100_000), "19 %: not yet");
        assert!(
            !contended(false, 10_000, 100_000),
            "10 %: a quiet machine's message ping-pong (measured up to 10 %)"
        );
        assert!(contended(true, 6_000, 100_000), "6 %: stays contended");
        assert!(!contended(false, 6_000, 100_000), "6 %: stays quiet");
        assert!(!contended(true, 4_000, 100_000), "4 %: quiet again");
        assert!(!contended(true, 0, 100_000), "nothing waited");
        assert!(
            contended(true, 0, 0) && !contended(false, 0, 0),
            "an empty window"
        );
    }

    #[test]
    fn a_forked_child_may_sample_though_its_parent_was_sampling() {
        PROCESS.machine.sampling.store(true, Ordering::Release);
        // What the shims' child handler calls through `fork::after_fork_in_child` (here in
        // this process).
        after_fork_in_child();
        assert!(!PROCESS.machine.sampling.load(Ordering::Acquire));
    }

    #[test]
    fn the_pressure_file_gives_the_some_total() {
        let text = "some avg10=20.92 avg60=11.20 avg300=12.34 total=3867859833\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(text), Some(3_867_859_833));
        assert_eq!(parse_pressure("full avg10=0.00 total=5\n"), None);
        assert_eq!(parse_pressure("some avg10=0.00 total=x\n"), None);
    }

    #[test]
    fn rt_control_says_when_and_refuses_anything_else() {
        for (value, when) in [
            (None, RtControl::WhileContended),
            (Some(""), RtControl::WhileContended),
            (Some("auto"), RtControl::WhileContended),
            (Some(" AUTO "), RtControl::WhileContended),
            (Some("1"), RtControl::Always),
            (Some(" 1 "), RtControl::Always),
            (Some("on"), RtControl::Always),
            (Some("True"), RtControl::Always),
            (Some("yes"), RtControl::Always),
            (Some("0"), RtControl::Never),
            (Some("off"), RtControl::Never),
            (Some("false"), RtControl::Never),
            (Some("NO"), RtControl::Never),
        ] {
            assert_eq!(RtControl::parse(value), Ok(when), "{value:?}");
        }
        for bad in ["2", "sometimes", "-1", "of"] {
            let err = RtControl::parse(Some(bad)).expect_err(bad);
            assert_eq!(err.value, bad);
            let text = err.to_string();
            assert!(text.contains(RT_CONTROL) && text.contains("off"), "{text}");
        }
    }

    #[test]
    fn make_fifo_reports_what_happened() {
        std::thread::spawn(|| {
            let fifo = make_fifo();
            assert_eq!(policy() == SCHED_FIFO, fifo);
        })
        .join()
        .expect("thread");
    }
}
