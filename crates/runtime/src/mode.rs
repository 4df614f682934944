//! Rollout modes (`XSCHED_MODE`): how far a queue lets xsched act, so that an operator can adopt
//! it on a real conflict one step at a time (../shared/docs/PAPERS.md §1, "What the editorial
//! asks for"): first only watch, then preempt at command boundaries, then preempt on the device.
//!
//! - `observe`: the queue is intercepted and goes through its XQueue (so it can be counted), but
//!   every command is launched at once and nobody ever suspends it (it stays registered, so the
//!   scheduler and the daemon see it and it can be switched, but their suspensions of it are
//!   ignored): the device sees what it would see natively, in the same order.
//! - `cooperative`: Level 1, progressive launching and suspension at command boundaries.
//! - `preemptive`: the highest level the backend offers.
//!
//! A running queue switches with [`XQueue::set_mode`](crate::XQueue::set_mode), or from the
//! daemon (`xsched mode set`).
//!
//! A mode chooses the level, so giving `XSCHED_LEVEL` too is an error, not a silent override;
//! so is giving observe a launch limit (`XSCHED_THRESHOLD`, `XSCHED_BATCH`,
//! `XSCHED_INFLIGHT_US`, `XSCHED_MAX_PENDING`) it would not use.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use xsched_core::{LaunchConfig, Level};

/// How far xsched acts on a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutMode {
    /// Intercept and count; launch everything at once, never suspend.
    Observe,
    /// Level 1: suspend at command boundaries.
    Cooperative,
    /// The backend's highest level.
    Preemptive,
}

impl RolloutMode {
    /// Every mode, in rollout order.
    pub const ALL: [RolloutMode; 3] = [
        RolloutMode::Observe,
        RolloutMode::Cooperative,
        RolloutMode::Preemptive,
    ];

    /// The name `XSCHED_MODE` takes.
    pub fn name(self) -> &'static str {
        match self {
            RolloutMode::Observe => "observe",
            RolloutMode::Cooperative => "cooperative",
            RolloutMode::Preemptive => "preemptive",
        }
    }

    /// The level and launch config of this mode on a backend whose highest level is `max`,
    /// with `config` the queue's own (for the modes that launch progressively).
    pub(crate) fn setting(self, max: Level, config: LaunchConfig) -> (Level, LaunchConfig) {
        match self {
            RolloutMode::Observe => (Level::Block, LaunchConfig::UNBOUNDED),
            RolloutMode::Cooperative => (Level::Block, config),
            RolloutMode::Preemptive => (max, config),
        }
    }

    fn number(self) -> u8 {
        match self {
            RolloutMode::Observe => 1,
            RolloutMode::Cooperative => 2,
            RolloutMode::Preemptive => 3,
        }
    }
}

impl From<RolloutMode> for xsched_proto::WireRolloutMode {
    fn from(m: RolloutMode) -> Self {
        match m {
            RolloutMode::Observe => xsched_proto::WireRolloutMode::Observe,
            RolloutMode::Cooperative => xsched_proto::WireRolloutMode::Cooperative,
            RolloutMode::Preemptive => xsched_proto::WireRolloutMode::Preemptive,
        }
    }
}

impl From<xsched_proto::WireRolloutMode> for RolloutMode {
    fn from(m: xsched_proto::WireRolloutMode) -> Self {
        match m {
            xsched_proto::WireRolloutMode::Observe => RolloutMode::Observe,
            xsched_proto::WireRolloutMode::Cooperative => RolloutMode::Cooperative,
            xsched_proto::WireRolloutMode::Preemptive => RolloutMode::Preemptive,
        }
    }
}

/// A queue's mode, read by its control on every scheduler operation (observe ignores
/// suspensions) and by its statistics, with whether the scheduler wants the queue held (so
/// that a queue leaving observe mode is held at once if its scheduler had suspended it).
#[derive(Debug, Default)]
pub(crate) struct ModeCell {
    mode: AtomicU8,
    wanted_held: AtomicBool,
}

impl ModeCell {
    pub(crate) fn new(mode: Option<RolloutMode>) -> ModeCell {
        ModeCell {
            mode: AtomicU8::new(mode.map_or(0, RolloutMode::number)),
            wanted_held: AtomicBool::new(false),
        }
    }

    pub(crate) fn set(&self, mode: RolloutMode) {
        self.mode.store(mode.number(), Ordering::SeqCst);
    }

    pub(crate) fn get(&self) -> Option<RolloutMode> {
        let n = self.mode.load(Ordering::SeqCst);
        RolloutMode::ALL.into_iter().find(|m| m.number() == n)
    }

    pub(crate) fn observing(&self) -> bool {
        self.get() == Some(RolloutMode::Observe)
    }

    /// The scheduler suspended (`true`) or resumed the queue, whether or not it was obeyed.
    pub(crate) fn scheduler_wants_held(&self, held: bool) {
        self.wanted_held.store(held, Ordering::SeqCst);
    }

    /// Whether the scheduler's last word was to hold the queue.
    pub(crate) fn wanted_held(&self) -> bool {
        self.wanted_held.load(Ordering::SeqCst)
    }
}

impl fmt::Display for RolloutMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`RolloutMode`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected observe, cooperative or preemptive")]
pub struct ParseModeError;

impl FromStr for RolloutMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<RolloutMode, ParseModeError> {
        RolloutMode::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or(ParseModeError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::QueueOptions;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for m in RolloutMode::ALL {
            assert_eq!(m.name().parse::<RolloutMode>(), Ok(m));
        }
        assert!("preempt".parse::<RolloutMode>().is_err());
        assert!("".parse::<RolloutMode>().is_err());
    }

    #[test]
    fn each_mode_sets_what_it_promises_and_keeps_the_hints() {
        let base = QueueOptions::default()
            .with_hint(xsched_core::Hint::Priority(4))
            .expect("a priority");
        let o = RolloutMode::Observe.apply(base);
        assert_eq!(
            (o.level, o.config, o.scheduled, o.mode),
            (
                Some(Level::Block),
                LaunchConfig::UNBOUNDED,
                true,
                Some(RolloutMode::Observe)
            )
        );
        let c = RolloutMode::Cooperative.apply(base);
        assert_eq!(
            (c.level, c.config, c.scheduled),
            (Some(Level::Block), base.config, true)
        );
        let p = RolloutMode::Preemptive.apply(base.with_level(Level::Block));
        assert_eq!((p.level, p.scheduled), (None, true));
        for o in [o, c, p] {
            assert_eq!(o.hints.priority, 4);
        }
    }
}
