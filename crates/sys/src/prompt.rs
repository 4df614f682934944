//! Prompt control threads, on request (`XSCHED_RT_CONTROL=1`): the threads that carry a
//! scheduling decision (the agent, its link to the daemon, the in-process scheduler, the
//! daemon's connection and timer threads) run at the lowest real-time priority (`SCHED_FIFO`
//! 1) where the process may use it.
//!
//! Why: a decision crosses up to four thread wake-ups between processes (application → agent
//! → daemon → the other process's agent). On a machine whose cores are busy with normal
//! threads (the device's own worker threads, on a CPU device), each wake-up waits for the
//! running thread's time slice: measured on the 2-core machine, Ready → suspend P90 2.3 ms and
//! P99 4 ms, longer than the foreground request it should protect; nice −20 did not shorten it.
//! A real-time thread preempts normal ones at once: P99 0.29 ms (docs/BENCHMARKS.md, issue 15).
//!
//! Why not by default: on a quiet machine a real-time thread is woken on the CPU it last ran
//! on rather than beside its waker, and waking an idle virtual CPU costs tens of microseconds:
//! the daemon's event → operation P50 went from 5 µs to 70–85 µs in 2 of 4 runs. Busy
//! machines gain, quiet ones lose; the operator chooses.
//!
//! These threads block between messages and do a few microseconds of work per message; a
//! thread that keeps the CPU anyway (a client flooding the daemon) is dropped back to normal
//! priority by a [`CpuGuard`]. Without the privilege (`CAP_SYS_NICE` or `RLIMIT_RTPRIO` ≥ 1)
//! the threads stay as they are.

use std::time::Duration;
use thread_priority::{
    NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
    ThreadPriorityOsValue, ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
};

/// The variable that turns real-time control threads on (`1`).
pub const RT_CONTROL: &str = "XSCHED_RT_CONTROL";

/// Make the calling control thread prompt (`SCHED_FIFO` 1) if asked for (`XSCHED_RT_CONTROL=1`)
/// and allowed; whether it now is.
pub fn make_prompt() -> bool {
    asked_for(std::env::var(RT_CONTROL).ok().as_deref()) && make_fifo()
}

/// Whether `XSCHED_RT_CONTROL` (its value, if set) asks for real-time control threads; any
/// value but `0`, `1` or nothing is refused with a warning (and means no).
fn asked_for(value: Option<&str>) -> bool {
    match value.map(str::trim) {
        Some("1") => true,
        None | Some("0" | "") => false,
        Some(other) => {
            tracing::warn!(
                "{RT_CONTROL}={other:?} is neither 0 nor 1; control threads stay normal"
            );
            false
        }
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

/// Back to normal priority (`SCHED_OTHER`, nice 0).
fn make_normal() {
    let other = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    let nice_0 = ThreadPriority::Os(ThreadPriorityOsValue::default());
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), nice_0, other) {
        tracing::warn!("cannot return a control thread to normal priority: {e:?}");
    }
}

/// How much CPU a prompt thread may use per window before it loses real-time priority.
const CPU_PER_WINDOW: Duration = Duration::from_millis(20);

/// The window [`CPU_PER_WINDOW`] is counted over (20 %).
const WINDOW: Duration = Duration::from_millis(100);

/// Drops a prompt thread back to normal priority, for good, once it used more than 20 % of a
/// CPU over a 100 ms window: whatever made it busy (a flood from one client) then competes
/// like any other thread instead of taking a core from everyone.
#[derive(Debug)]
pub struct CpuGuard {
    prompt: bool,
    window_start: Duration,
    cpu_at_start: Duration,
}

fn wall() -> Duration {
    Duration::from_nanos(crate::clock::now().0)
}

fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(Duration::ZERO, Duration::from)
}

impl CpuGuard {
    /// Make the calling thread prompt ([`make_prompt`]) and start guarding it.
    pub fn start() -> CpuGuard {
        CpuGuard::guarding(make_prompt())
    }

    /// Guard a thread that is prompt (`true`) or not.
    fn guarding(prompt: bool) -> CpuGuard {
        CpuGuard {
            prompt,
            window_start: wall(),
            cpu_at_start: thread_cpu(),
        }
    }

    /// Whether the thread is still prompt.
    pub fn is_prompt(&self) -> bool {
        self.prompt
    }

    /// Call after each unit of work (a message handled): checks the thread's CPU use.
    pub fn check(&mut self) {
        if !self.prompt {
            return;
        }
        let now = wall();
        if now.saturating_sub(self.window_start) < WINDOW {
            let used = thread_cpu().saturating_sub(self.cpu_at_start);
            if used > CPU_PER_WINDOW {
                self.prompt = false;
                make_normal();
                tracing::warn!(
                    "a control thread used {} ms of CPU in under {} ms; it continues at \
                     normal priority",
                    used.as_millis(),
                    WINDOW.as_millis()
                );
            }
            return;
        }
        self.window_start = now;
        self.cpu_at_start = thread_cpu();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_prompt_thread_runs_fifo_and_a_busy_one_drops_back_to_normal() {
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(make_fifo());
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
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn only_1_asks_for_real_time_control_threads() {
        assert!(asked_for(Some("1")));
        assert!(asked_for(Some(" 1 ")));
        for off in [None, Some("0"), Some(""), Some("yes"), Some("2")] {
            assert!(!asked_for(off), "{off:?}");
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
