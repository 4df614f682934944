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

mod budget;
mod env;
mod pressure;
mod thread;

pub use env::{BadRtControl, RT_CONTROL, RT_CONTROL_VALUES, RtControl};
pub use pressure::{CONTENDED_AT, SAMPLE_EVERY, contended};

use budget::{Budget, CPU_PER_WINDOW, PROCESS_CPU_PER_WINDOW, WINDOW, window_of};
use pressure::{Machine, cpu_stall_us};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use thread::{Scheduling, make_fifo};

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
mod tests;
