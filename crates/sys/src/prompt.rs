//! Prompt control threads: the threads that carry a scheduling decision (the agent, its link
//! to the daemon, the in-process scheduler, the daemon's connection and timer threads) run at
//! the lowest real-time priority (`SCHED_FIFO` 1) while threads wait for the machine's CPUs
//! (the default), always (`XSCHED_RT_CONTROL=1`), or never (`XSCHED_RT_CONTROL=0`), as
//! [`RtControl`] reads it, where the process may use it.
//!
//! Why: a decision crosses up to four thread wake-ups between processes (application → agent
//! → daemon → the other process's agent). On a machine whose cores are busy with normal
//! threads (the device's own worker threads, on a CPU device), each wake-up waits for the
//! running thread's time slice: measured on the 2-core machine, Ready → suspend P90 2.3 ms and
//! P99 4 ms, longer than the foreground request it should protect; nice −20 did not shorten it.
//! A real-time thread preempts normal ones at once: P99 0.29 ms (docs/BENCHMARKS.md, issue 15).
//!
//! Why only under contention: where a CPU is free a real-time thread is woken on the CPU it
//! last ran on rather than beside its waker, and waking an idle virtual CPU costs tens of
//! microseconds (the daemon's event → operation P50 went from 5 µs to 70–85 µs in 2 of 4
//! runs); and where a CPU is free a normal thread is not kept waiting anyway. So each control
//! thread looks, after each unit of its work ([`CpuGuard::check`]), at the machine's CPU
//! pressure (`/proc/pressure/cpu`: the time some runnable thread waited for a CPU, sampled at
//! most every [`SAMPLE_EVERY`] per process) and is real-time only while threads waited at
//! least [`CONTENDED_AT`] of the last window ([`contended`], with hysteresis; with no recent
//! sample to start a window from, normal for a first window of 20 ms). Busy CPUs alone do not
//! count: two threads passing messages back and forth keep both CPUs of a small machine busy
//! but never wait, and there real-time wake-ups only cost. A thread woken while its setting is
//! stale pays one slow wake-up; control threads wake at least every ping (150 ms), so a change
//! takes effect within that. Without pressure accounting (a kernel without PSI, or booted
//! `psi=0`) the threads stay normal by default.
//!
//! These threads block between messages and do a few microseconds of work per message; a
//! thread that keeps the CPU anyway (a client flooding the daemon) is dropped back to normal
//! priority, for good, by its [`CpuGuard`]. Without the privilege (`CAP_SYS_NICE` or
//! `RLIMIT_RTPRIO` ≥ 1) the threads stay as they are.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use thread_priority::{
    NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
    ThreadPriorityOsValue, ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
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

/// Back to normal priority (`SCHED_OTHER`, nice 0).
fn make_normal() {
    let other = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    let nice_0 = ThreadPriority::Os(ThreadPriorityOsValue::default());
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), nice_0, other) {
        tracing::warn!("cannot return a control thread to normal priority: {e:?}");
    }
}

/// How often a process samples the machine's CPU pressure, at most.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The first window of a process, or after a stale sample: short, so that contention is seen
/// soon (a thread is normal until then).
const FIRST_WINDOW: Duration = Duration::from_millis(20);

/// A sample older than this is not used as the start of a window (see [`machine_contended`]).
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

/// The process's last sample of the machine.
struct Sample {
    at: Instant,
    stall_us: u64,
    /// How long the window it starts lasts at least.
    window: Duration,
}

static SAMPLE: Mutex<Option<Sample>> = Mutex::new(None);
static CONTENDED: AtomicBool = AtomicBool::new(false);

/// Whether threads wait for the machine's CPUs, sampled at most every [`SAMPLE_EVERY`] in this
/// process (whichever control thread looks first after that samples; the others read the last
/// answer).
fn machine_contended() -> bool {
    let now = Instant::now();
    if let Ok(mut last) = SAMPLE.try_lock()
        && last
            .as_ref()
            .is_none_or(|s| now.duration_since(s.at) >= s.window)
        && let Some(stall_us) = cpu_stall_us()
    {
        let fresh = last
            .as_ref()
            .filter(|s| now.duration_since(s.at) <= STALE_AFTER);
        // No window yet (the process's first look), or one so long that it would average over
        // a quiet past: not contended until a short first window says so.
        let busy = fresh.is_some_and(|s| {
            let window = u64::try_from(now.duration_since(s.at).as_micros()).unwrap_or(u64::MAX);
            contended(
                CONTENDED.load(Ordering::Relaxed),
                stall_us.saturating_sub(s.stall_us),
                window,
            )
        });
        CONTENDED.store(busy, Ordering::Relaxed);
        let window = if fresh.is_some() {
            SAMPLE_EVERY
        } else {
            FIRST_WINDOW
        };
        *last = Some(Sample {
            at: now,
            stall_us,
            window,
        });
    }
    CONTENDED.load(Ordering::Relaxed)
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
    when: RtControl,
    prompt: bool,
    /// The guard tripped, or real-time is not permitted: normal priority from now on.
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
    /// it always, or by default if threads wait for the machine's CPUs.
    pub fn start() -> CpuGuard {
        let mut guard = CpuGuard::guarding(RtControl::configured());
        guard.follow_machine();
        guard
    }

    fn guarding(when: RtControl) -> CpuGuard {
        let mut guard = CpuGuard {
            when,
            prompt: false,
            dropped: false,
            window_start: wall(),
            cpu_at_start: thread_cpu(),
        };
        if when == RtControl::Always {
            guard.set_prompt(true);
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
        } else {
            make_normal();
            self.prompt = false;
        }
    }

    /// By default, real-time exactly while threads wait for the machine's CPUs.
    fn follow_machine(&mut self) {
        if self.when == RtControl::WhileContended {
            self.set_prompt(machine_contended());
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
            let mut guard = CpuGuard::guarding(RtControl::Always);
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
            let mut guard = CpuGuard::guarding(RtControl::WhileContended);
            assert!(!guard.is_prompt(), "normal until a look at the machine");
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
            let mut never = CpuGuard::guarding(RtControl::Never);
            never.check();
            assert!(!never.is_prompt());
            assert_eq!(policy(), SCHED_OTHER);
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
