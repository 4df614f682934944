//! Scheduling policies, one file each, and the one registry that names them.
//!
//! Most policies are rank functions (SOAP, Scully et al. 2018): each ready queue gets a rank and
//! the lowest rank in a scope (a device, or all devices) runs. [`serve_lowest_rank`] does that
//! once for all of them. Share policies keep a little state and ask for timers.

mod bandwidth;
mod cfs;
mod fcfs;
mod hpf;
mod kedf;
mod laxity;
mod mlfq;
mod slo_aware;
mod starvation;
mod throttle;
mod vtime;

pub use bandwidth::Bandwidth;
pub use cfs::Cfs;
pub use fcfs::Fcfs;
pub use hpf::{Hpf, HpfGlobal};
pub use kedf::KEarliestDeadline;
pub use laxity::Laxity;
pub use mlfq::Mlfq;
pub use slo_aware::SloAware;
pub use starvation::Guarded;
pub use throttle::Throttle;

use crate::error::CoreError;
use crate::ids::DeviceId;
use crate::scheduler::QueueView;
use crate::time::Nanos;

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

/// Every registered policy name, for help texts and errors.
pub const NAMES: &[&str] = &[
    "fcfs",
    "hpf",
    "hpf-global",
    "bandwidth",
    "laxity",
    "kedf",
    "cfs",
    "mlfq",
    "slo-aware",
    "quota",
    "tgs",
];

/// Build a policy by name. `kedf` takes an optional `:k` suffix (`kedf:2`), default 1;
/// `slo-aware:between-requests` is `slo-aware`'s baseline (LP only between HP requests);
/// `hpf:min-share=F` is fixed priority with a starvation guard ([`Guarded`]);
/// `quota:SHARE` (default 0.5) and `tgs` are the launch-throttling baselines of other systems
/// (vCUDA-like fixed quota, TGS-like adaptive rate), see [`Throttle`].
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, CoreError> {
    let unknown = || CoreError::UnknownPolicy(name.to_string());
    let bad = |reason| CoreError::BadPolicyArgument {
        name: name.to_string(),
        reason,
    };
    let (base, arg) = match name.split_once(':') {
        Some((b, a)) => (b, Some(a)),
        None => (name, None),
    };
    let policy: Box<dyn Policy> = match (base, arg) {
        ("fcfs", None) => Box::new(Fcfs),
        ("hpf", None) => Box::new(Hpf::default()),
        ("hpf", Some(arg)) => match arg
            .strip_prefix("min-share=")
            .and_then(|f| f.parse::<f64>().ok())
            .and_then(Guarded::new)
        {
            Some(g) => Box::new(g),
            None => return Err(bad("takes `min-share=F` with 0 < F <= 0.5")),
        },
        ("hpf-global", None) => Box::new(HpfGlobal::default()),
        ("bandwidth", None) => Box::new(Bandwidth::default()),
        ("laxity", None) => Box::new(Laxity::default()),
        ("kedf", None) => Box::new(KEarliestDeadline::new(1)),
        ("cfs", None) => Box::new(Cfs::default()),
        ("mlfq", None) => Box::new(Mlfq::default()),
        ("slo-aware", None) => Box::new(SloAware::harvest()),
        ("slo-aware", Some("between-requests")) => Box::new(SloAware::between_requests()),
        ("quota", None) => Box::new(Throttle::quota(0.5).ok_or_else(unknown)?),
        ("quota", Some(share)) => match share.parse::<f64>().ok().and_then(Throttle::quota) {
            Some(t) => Box::new(t),
            None => return Err(bad("takes a share with 0 < SHARE <= 1 (`quota:0.2`)")),
        },
        ("tgs", None) => Box::new(Throttle::tgs()),
        ("kedf", Some(k)) => match k.parse::<usize>() {
            Ok(k) if k >= 1 => Box::new(KEarliestDeadline::new(k)),
            _ => return Err(unknown()),
        },
        _ => return Err(unknown()),
    };
    Ok(policy)
}

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

#[cfg(test)]
pub(crate) mod test_util {
    use crate::hint::QueueHints;
    use crate::ids::{DeviceId, QueueId};
    use crate::scheduler::QueueView;
    use crate::time::Nanos;

    /// A queue view for policy tests.
    pub fn view(id: u32, device: u16, priority: i32, ready: bool) -> QueueView {
        QueueView {
            id: QueueId(id),
            device: DeviceId(device),
            hints: QueueHints {
                priority,
                ..QueueHints::default()
            },
            ready,
            ready_since: Nanos::ZERO,
            service: Nanos::ZERO,
        }
    }

    /// Run a policy once over `queues` and return the run flags.
    pub fn decide(p: &mut dyn super::Policy, now: Nanos, queues: &[QueueView]) -> Vec<bool> {
        let mut run = vec![true; queues.len()];
        p.schedule(now, queues, &mut run);
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_builds_every_name() {
        for name in NAMES {
            let p = by_name(name).expect("registered");
            assert_eq!(p.name(), *name);
        }
        assert_eq!(by_name("kedf:3").map(|p| p.name()).ok(), Some("kedf"));
        assert!(by_name("slo-aware:between-requests").is_ok());
        assert!(by_name("slo-aware:nonsense").is_err());
        assert!(by_name("kedf:0").is_err());
        assert_eq!(by_name("quota:0.25").map(|p| p.name()).ok(), Some("quota"));
        assert!(by_name("quota:0").is_err());
        assert!(by_name("quota:lots").is_err());
        assert_eq!(
            by_name("hpf:min-share=0.05").map(|p| p.name()).ok(),
            Some("hpf")
        );
        let msg = by_name("hpf:min-share=0.9")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("min-share") && msg.contains("0.5"), "{msg}");
        assert!(by_name("hpf:share=0.1").is_err());
        assert!(by_name("nope").is_err());
        let msg = by_name("nope")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("hpf-global"), "{msg}");
    }
}
