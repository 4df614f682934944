//! Prompt control threads: the threads that carry a scheduling decision (the agent, its link
//! to the daemon, the in-process scheduler, the daemon's connection and timer threads) run at
//! the lowest real-time priority (`SCHED_FIFO` 1) while the machine's CPUs are saturated
//! (the default), always (`XSCHED_RT_CONTROL=1`), or never (`XSCHED_RT_CONTROL=0`), where the
//! process may use it.
//!
//! Why: a decision crosses up to four thread wake-ups between processes (application → agent
//! → daemon → the other process's agent). On a machine whose cores are busy with normal
//! threads (the device's own worker threads, on a CPU device), each wake-up waits for the
//! running thread's time slice: measured on the 2-core machine, Ready → suspend P90 2.3 ms and
//! P99 4 ms, longer than the foreground request it should protect; nice −20 did not shorten it.
//! A real-time thread preempts normal ones at once: P99 0.29 ms (docs/BENCHMARKS.md, issue 15).
//!
//! Why only while saturated: on a machine with an idle CPU a real-time thread is woken on the
//! CPU it last ran on rather than beside its waker, and waking an idle virtual CPU costs tens
//! of microseconds (the daemon's event → operation P50 went from 5 µs to 70–85 µs in 2 of 4
//! runs); and with an idle CPU a normal thread is not kept waiting anyway. So each control
//! thread looks, after each unit of its work ([`CpuGuard::check`]), at the machine's idle time
//! (`/proc/stat`, sampled at most every [`SAMPLE_EVERY`] per process) and is real-time only
//! while fewer than [`BUSY_BELOW`] CPUs were idle on average ([`saturated`], with
//! hysteresis; with no recent sample to start a window from, normal for a first window of
//! 20 ms). A thread woken while its setting is stale pays one slow wake-up; control
//! threads wake at least every ping (150 ms), so a change takes effect within that.
//!
//! These threads block between messages and do a few microseconds of work per message; a
//! thread that keeps the CPU anyway (a client flooding the daemon) is dropped back to normal
//! priority, for good, by its [`CpuGuard`]. Without the privilege (`CAP_SYS_NICE` or
//! `RLIMIT_RTPRIO` ≥ 1) the threads stay as they are.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thread_priority::{
    NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
    ThreadPriorityOsValue, ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
};

/// The variable that chooses when control threads are real-time: `1` always, `0` never, unset
/// (or `auto`) while the CPUs are saturated.
pub const RT_CONTROL: &str = "XSCHED_RT_CONTROL";

/// When control threads run `SCHED_FIFO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Never,
    Always,
    WhileSaturated,
}

/// What `XSCHED_RT_CONTROL` (its value, if set) asks for; any other value is refused with a
/// warning and means the default.
fn asked_for(value: Option<&str>) -> When {
    match value.map(str::trim) {
        Some("1") => When::Always,
        Some("0") => When::Never,
        None | Some("" | "auto") => When::WhileSaturated,
        Some(other) => {
            tracing::warn!(
                "{RT_CONTROL}={other:?} is none of 0, 1, auto; control threads are real-time \
                 while the CPUs are saturated"
            );
            When::WhileSaturated
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

/// How often a process samples the machine's idle time, at most.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The first window of a process, or after a stale sample: short, so that a busy machine is
/// seen soon (a thread is normal until then).
const FIRST_WINDOW: Duration = Duration::from_millis(20);

/// A sample older than this is not used as the start of a window (see [`machine_saturated`]).
const STALE_AFTER: Duration = Duration::from_millis(400);

/// Saturated: on average less than this many CPUs were idle over the sampled window (a
/// woken thread then mostly finds every CPU busy).
pub const BUSY_BELOW: f64 = 0.5;

/// No longer saturated once more than this many CPUs were idle on average (hysteresis).
const QUIET_ABOVE: f64 = 0.75;

/// Whether `cpus` CPUs count as saturated after a window in which they were idle `idle` of
/// `total` CPU time (any unit), given whether they did before: with fewer than [`BUSY_BELOW`]
/// CPUs idle on average they are, with more than [`QUIET_ABOVE`] they are not, in between they
/// stay as they were. An empty window changes nothing.
pub fn saturated(before: bool, idle: u64, total: u64, cpus: u64) -> bool {
    if total == 0 {
        return before;
    }
    let idle_cpus = idle as f64 / total as f64 * cpus as f64;
    if idle_cpus < BUSY_BELOW {
        true
    } else if idle_cpus > QUIET_ABOVE {
        false
    } else {
        before
    }
}

/// The machine's CPUs (all of them: `/proc/stat` counts them all).
fn cpus() -> u64 {
    static CPUS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        std::fs::read_to_string("/proc/stat").map_or(1, |s| {
            let n = s
                .lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count();
            u64::try_from(n.max(1)).unwrap_or(1)
        })
    })
}

/// The machine's idle and total CPU time so far (`/proc/stat`'s `cpu` line, in ticks; idle
/// counts iowait too), or `None` where it cannot be read.
fn cpu_times() -> Option<(u64, u64)> {
    parse_cpu_line(std::fs::read_to_string("/proc/stat").ok()?.lines().next()?)
}

fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let total = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((idle, total))
}

/// The process's last sample of the machine.
struct Sample {
    at: Instant,
    idle: u64,
    total: u64,
    /// How long the window it starts lasts at least.
    window: Duration,
}

static SAMPLE: Mutex<Option<Sample>> = Mutex::new(None);
static SATURATED: AtomicBool = AtomicBool::new(false);

/// Whether the machine's CPUs are saturated, sampled at most every [`SAMPLE_EVERY`] in this
/// process (whichever control thread looks first after that samples; the others read the last
/// answer).
fn machine_saturated() -> bool {
    let now = Instant::now();
    if let Ok(mut last) = SAMPLE.try_lock()
        && last
            .as_ref()
            .is_none_or(|s| now.duration_since(s.at) >= s.window)
        && let Some((idle, total)) = cpu_times()
    {
        let fresh = last
            .as_ref()
            .filter(|s| now.duration_since(s.at) <= STALE_AFTER);
        // No window yet (the process's first look), or one so long that it would average over
        // a quiet past: not saturated until a short first window says so.
        let busy = fresh.is_some_and(|s| {
            saturated(
                SATURATED.load(Ordering::Relaxed),
                idle.saturating_sub(s.idle),
                total.saturating_sub(s.total),
                cpus(),
            )
        });
        SATURATED.store(busy, Ordering::Relaxed);
        let window = if fresh.is_some() {
            SAMPLE_EVERY
        } else {
            FIRST_WINDOW
        };
        *last = Some(Sample {
            at: now,
            idle,
            total,
            window,
        });
    }
    SATURATED.load(Ordering::Relaxed)
}

/// How much CPU a prompt thread may use per window before it loses real-time priority.
const CPU_PER_WINDOW: Duration = Duration::from_millis(20);

/// The window [`CPU_PER_WINDOW`] is counted over (20 %).
const WINDOW: Duration = Duration::from_millis(100);

/// A control thread's priority: real-time when [`RT_CONTROL`] says so, and dropped back to
/// normal priority, for good, once it used more than 20 % of a CPU over a 100 ms window:
/// whatever made it busy (a flood from one client) then competes like any other thread instead
/// of taking a core from everyone.
#[derive(Debug)]
pub struct CpuGuard {
    when: When,
    prompt: bool,
    /// The guard tripped: normal priority from now on.
    dropped: bool,
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
    /// Start guarding the calling control thread, real-time now if [`RT_CONTROL`] asks for
    /// it always, or by default if the machine is saturated.
    pub fn start() -> CpuGuard {
        let mut guard = CpuGuard::guarding(asked_for(std::env::var(RT_CONTROL).ok().as_deref()));
        guard.follow_machine();
        guard
    }

    fn guarding(when: When) -> CpuGuard {
        let mut guard = CpuGuard {
            when,
            prompt: false,
            dropped: false,
            window_start: wall(),
            cpu_at_start: thread_cpu(),
        };
        if when == When::Always {
            guard.set_prompt(true);
        }
        guard
    }

    /// Whether the thread is real-time now.
    pub fn is_prompt(&self) -> bool {
        self.prompt
    }

    /// Become real-time or normal; a thread that may not be real-time stays as it is.
    fn set_prompt(&mut self, prompt: bool) {
        if prompt == self.prompt || self.dropped {
            return;
        }
        if prompt {
            self.prompt = make_fifo();
            self.window_start = wall();
            self.cpu_at_start = thread_cpu();
        } else {
            make_normal();
            self.prompt = false;
        }
    }

    /// By default, real-time exactly while the machine is saturated.
    fn follow_machine(&mut self) {
        if self.when == When::WhileSaturated {
            self.set_prompt(machine_saturated());
        }
    }

    /// Call after each unit of work (a message handled, a wake-up): checks the thread's CPU
    /// use, and (by default) whether it should be real-time now.
    pub fn check(&mut self) {
        self.guard_cpu();
        self.follow_machine();
    }

    fn guard_cpu(&mut self) {
        if !self.prompt {
            return;
        }
        let now = wall();
        if now.saturating_sub(self.window_start) < WINDOW {
            let used = thread_cpu().saturating_sub(self.cpu_at_start);
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
    fn a_prompt_thread_runs_fifo_and_a_busy_one_drops_back_to_normal_for_good() {
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(When::Always);
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
    fn a_thread_follows_the_machine_only_by_default() {
        std::thread::spawn(|| {
            let mut guard = CpuGuard::guarding(When::WhileSaturated);
            assert!(!guard.is_prompt(), "normal until a look at the machine");
            guard.set_prompt(true);
            if !guard.is_prompt() {
                eprintln!("skipped: no privilege for SCHED_FIFO here");
                return;
            }
            assert_eq!(policy(), SCHED_FIFO, "real-time while saturated");
            guard.set_prompt(false);
            assert_eq!(policy(), SCHED_OTHER, "normal again once quiet");
            let mut never = CpuGuard::guarding(When::Never);
            never.check();
            assert!(!never.is_prompt());
            assert_eq!(policy(), SCHED_OTHER);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn saturated_means_little_idle_time_with_hysteresis() {
        // 2 CPUs over 100 ticks each: 200 ticks of CPU time.
        assert!(saturated(false, 0, 200, 2), "no idle time");
        assert!(saturated(false, 49, 200, 2), "0.49 CPUs idle");
        assert!(!saturated(false, 50, 200, 2), "half a CPU idle: not yet");
        assert!(
            saturated(true, 70, 200, 2),
            "0.7 CPUs idle: stays saturated"
        );
        assert!(!saturated(false, 70, 200, 2), "0.7 CPUs idle: stays quiet");
        assert!(!saturated(true, 76, 200, 2), "0.76 CPUs idle: quiet again");
        assert!(
            !saturated(true, 100, 200, 2),
            "one CPU idle (a quiet ping-pong)"
        );
        assert!(saturated(false, 40, 6400, 64), "64 CPUs, 0.4 idle");
        assert!(!saturated(true, 100, 6400, 64), "64 CPUs, one idle");
        assert!(
            saturated(true, 0, 0, 2) && !saturated(false, 0, 0, 2),
            "an empty window"
        );
        assert!(cpus() >= 1);
    }

    #[test]
    fn the_cpu_line_gives_idle_with_iowait_and_the_total_without_guests() {
        let line = "cpu  100 5 20 300 10 1 2 3 7 0";
        assert_eq!(parse_cpu_line(line), Some((310, 441)));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4"), None);
        assert_eq!(parse_cpu_line("cpu  x 2 3 4"), None);
        assert!(cpu_times().is_some_and(|(idle, total)| idle <= total));
    }

    #[test]
    fn rt_control_says_when() {
        assert_eq!(asked_for(Some("1")), When::Always);
        assert_eq!(asked_for(Some(" 1 ")), When::Always);
        assert_eq!(asked_for(Some("0")), When::Never);
        for default in [None, Some(""), Some("auto"), Some("yes"), Some("2")] {
            assert_eq!(asked_for(default), When::WhileSaturated, "{default:?}");
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
