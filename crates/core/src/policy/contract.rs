//! What a policy is: the trait every policy implements, the shared rank-serving rule, and the
//! shape of a policy table row. Policies import this file, never the table that lists them, so
//! no policy file and the registry import each other.

use crate::error::CoreError;
use crate::ids::DeviceId;
use crate::time::Nanos;
use crate::view::QueueView;

/// Decides which queues may run.
pub trait Policy: Send {
    /// The registry name.
    fn name(&self) -> &'static str;

    /// Clear `run[i]` for each `queues[i]` that must be suspended (all start `true`).
    fn schedule(&mut self, now: Nanos, queues: &[QueueView], run: &mut [bool]);

    /// When the policy next wants to decide even if no event arrives.
    fn next_timer(&self) -> Option<Nanos> {
        None
    }

    /// Set `protect[i]` (all start `false`) for each queue whose launch limits may be lifted
    /// while it runs and others on its device are suspended for it
    /// ([`Operation::Protect`](crate::Operation::Protect)). The limits (threshold, in-flight
    /// budget) exist only so that a suspend takes effect quickly, so a queue may be marked only
    /// if this policy can never suspend it for another queue, ready or not, as queues are now
    /// (a strict priority top); otherwise the queue that preempts it would wait for its whole
    /// backlog. Never for policies that take the device back on a timer (time slices,
    /// deadlines).
    fn protectable(&mut self, _queues: &[QueueView], _protect: &mut [bool]) {}

    /// Whether the policy can do its job with these queues: an error says what they lack
    /// (checked when a policy is chosen, and when an in-process queue is created).
    fn check(&self, _queues: &[QueueView]) -> Result<(), CoreError> {
        Ok(())
    }
}

/// One row of the policy table ([`super::PolicySpec`] reads it): a name and how to build the
/// policy from the argument written after `:`.
pub struct PolicyEntry {
    /// The name before any `:` (`hpf`, `kedf`).
    pub name: &'static str,
    /// The argument it takes after `:`, as help and errors show it (`min-share=F`); `None` if it
    /// takes none, and then `name:anything` is refused.
    pub argument: Option<&'static str>,
    /// Builds the policy; an argument it cannot take is an error saying what it must be.
    pub build: Build,
}

/// How a [`PolicyEntry`] builds its policy from the argument after `:` (`None` without one); the
/// error says what the argument must be.
pub type Build = fn(Option<&str>) -> Result<Box<dyn Policy>, &'static str>;

/// Where a rank is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Queues compete only with queues on the same device.
    PerDevice,
    /// All queues compete, across devices.
    Global,
}

/// Run, in each scope, the queues whose rank is at most the lowest rank among *ready* queues
/// there; suspend the rest (idle ones too, so they cannot slip work in when they wake).
/// `scratch` holds per-device minima and is reused to keep the hot path allocation-free.
pub fn serve_lowest_rank<R: Ord + Copy>(
    queues: &[QueueView],
    run: &mut [bool],
    scope: Scope,
    scratch: &mut Vec<(DeviceId, R)>,
    rank: impl Fn(&QueueView) -> R,
) {
    scratch.clear();
    let key = |q: &QueueView| match scope {
        Scope::PerDevice => q.device,
        Scope::Global => DeviceId(0),
    };
    for q in queues.iter().filter(|q| q.ready) {
        let r = rank(q);
        let k = key(q);
        match scratch.iter_mut().find(|(d, _)| *d == k) {
            Some((_, best)) if r < *best => *best = r,
            Some(_) => {}
            None => scratch.push((k, r)),
        }
    }
    for (q, run) in queues.iter().zip(run.iter_mut()) {
        let k = key(q);
        if let Some((_, best)) = scratch.iter().find(|(d, _)| *d == k) {
            *run = rank(q) <= *best;
        }
    }
}
