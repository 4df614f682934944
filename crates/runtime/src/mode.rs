//! Rollout modes (`XSCHED_MODE`): how far a queue lets xsched act, so that an operator can adopt
//! it on a real conflict one step at a time (../shared/docs/PAPERS.md §1, "What the editorial
//! asks for"): first only watch, then preempt at command boundaries, then preempt on the device.
//!
//! - `observe`: the queue is intercepted and goes through its XQueue (so it can be counted), but
//!   every command is launched at once and nobody ever suspends it: the device sees what it
//!   would see natively, in the same order.
//! - `cooperative`: Level 1, progressive launching and suspension at command boundaries.
//! - `preemptive`: the highest level the backend offers.
//!
//! A mode chooses the level, so giving `XSCHED_LEVEL` too is an error, not a silent override;
//! so is giving observe a launch limit (`XSCHED_THRESHOLD`, `XSCHED_BATCH`,
//! `XSCHED_INFLIGHT_US`) it would not use.

use crate::options::QueueOptions;
use std::fmt;
use std::str::FromStr;
use xsched_core::{LaunchConfig, Level};

/// How far xsched acts on a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Intercept and count; launch everything at once, never suspend.
    Observe,
    /// Level 1: suspend at command boundaries.
    Cooperative,
    /// The backend's highest level.
    Preemptive,
}

impl Mode {
    /// Every mode, in rollout order.
    pub const ALL: [Mode; 3] = [Mode::Observe, Mode::Cooperative, Mode::Preemptive];

    /// The name `XSCHED_MODE` takes.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Cooperative => "cooperative",
            Mode::Preemptive => "preemptive",
        }
    }

    /// `options` in this mode (hints kept).
    pub fn apply(self, options: QueueOptions) -> QueueOptions {
        match self {
            Mode::Observe => QueueOptions {
                level: Some(Level::Block),
                config: LaunchConfig::UNBOUNDED,
                scheduled: false,
                ..options
            },
            Mode::Cooperative => options.with_level(Level::Block),
            Mode::Preemptive => QueueOptions {
                level: None,
                ..options
            },
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| "expected observe, cooperative or preemptive".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert!("preempt".parse::<Mode>().is_err());
        assert!("".parse::<Mode>().is_err());
    }

    #[test]
    fn each_mode_sets_what_it_promises_and_keeps_the_hints() {
        let base = QueueOptions::default()
            .with_hint(xsched_core::Hint::Priority(4))
            .expect("a priority");
        let o = Mode::Observe.apply(base);
        assert_eq!(
            (o.level, o.config, o.scheduled),
            (Some(Level::Block), LaunchConfig::UNBOUNDED, false)
        );
        let c = Mode::Cooperative.apply(base);
        assert_eq!(
            (c.level, c.config, c.scheduled),
            (Some(Level::Block), base.config, true)
        );
        let p = Mode::Preemptive.apply(base.with_level(Level::Block));
        assert_eq!((p.level, p.scheduled), (None, true));
        for o in [o, c, p] {
            assert_eq!(o.hints.priority, 4);
        }
    }
}
