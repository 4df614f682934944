//! The prompt control threads' tests: the guard on real threads (real-time where the privilege
//! allows it), and the sampler, the budget, the environment and the thread's own scheduling on
//! their own. One file for all of them: several share the helpers that read a thread's policy.

use super::pressure::{FIRST_WINDOW, PressureSample, STALE_AFTER, due, next, parse_pressure};
use super::thread::{nice_in_stat, nice_priority};
use super::*;
use thread_priority::{
    NormalThreadSchedulePolicy, ThreadSchedulePolicy, set_thread_priority_and_policy,
    thread_native_id,
};

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
            eprintln!("skipped: no privilege for SCHED_FIFO here (CAP_SYS_NICE, RLIMIT_RTPRIO)");
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
    let want = PressureSample {
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
