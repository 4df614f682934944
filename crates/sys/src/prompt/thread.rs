//! The calling thread's own scheduling: making it `SCHED_FIFO` 1, and the policy and nice value
//! it had before, to return it to. Kept apart so that the system calls and the reading of
//! `/proc/thread-self/stat` sit in one place, beside the conversions they need.

use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id, thread_schedule_policy_param,
};

pub(super) fn make_fifo() -> bool {
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
pub(super) struct Scheduling {
    policy: ThreadSchedulePolicy,
    /// Its nice value, as the `thread-priority` crate takes it for `policy`.
    priority: ThreadPriority,
}

impl Scheduling {
    /// The calling thread's, if it runs a normal policy and both can be read (`None` for a
    /// thread that is real-time already: it is left as it is).
    pub(super) fn of_this_thread() -> Option<Scheduling> {
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
    pub(super) fn restore(self) -> Result<(), thread_priority::Error> {
        set_thread_priority_and_policy(thread_native_id(), self.priority, self.policy)
    }
}

/// A thread's nice value: field 19 of its `/proc/…/stat` (after the parenthesized name, which
/// may hold anything).
pub(super) fn nice_in_stat(stat: &str) -> Option<i32> {
    let fields = &stat[stat.rfind(')')? + 1..];
    fields.split_whitespace().nth(19 - 3)?.parse().ok()
}

/// The priority that the `thread-priority` crate turns into nice value `nice` for `policy` (it
/// takes nice values only through its portable 0–99 scale).
pub(super) fn nice_priority(nice: i32, policy: ThreadSchedulePolicy) -> Option<ThreadPriority> {
    (0..=u8::MAX)
        .filter_map(|p| ThreadPriorityValue::try_from(p).ok())
        .map(ThreadPriority::Crossplatform)
        .find(|p| p.to_posix(policy).is_ok_and(|n| n == nice))
}
