//! Progressive-launching configuration, validated on construction.

use crate::error::CoreError;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// How an XQueue feeds its hardware queue.
///
/// At most `threshold` commands are in flight; a synchronization point is placed every `batch`
/// commands. Beyond XSched, an optional in-flight *time* budget also stops launching while the
/// estimated execution time already in flight reaches it, which bounds Level-1 preemption
/// latency for long commands (a count alone bounds it only by `threshold × T`). The budget
/// applies at Level 1 only: at Levels 2 and 3 the hardware holds or stops queued commands, so
/// what is in flight does not delay a preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchConfig {
    threshold: u32,
    batch: u32,
    inflight_budget: Option<Nanos>,
}

impl LaunchConfig {
    /// XSched's reference default: threshold 16, batch 8, no time budget.
    pub const DEFAULT: LaunchConfig = LaunchConfig {
        threshold: 16,
        batch: 8,
        inflight_budget: None,
    };

    /// No bound at all: what an application gets without xsched (everything goes to hardware).
    pub const UNBOUNDED: LaunchConfig = LaunchConfig {
        threshold: u32::MAX,
        batch: u32::MAX,
        inflight_budget: None,
    };

    /// A validated config: `threshold >= batch >= 1`.
    pub fn new(threshold: u32, batch: u32) -> Result<LaunchConfig, CoreError> {
        if batch < 1 || threshold < batch {
            return Err(CoreError::InvalidLaunchConfig { threshold, batch });
        }
        Ok(LaunchConfig {
            threshold,
            batch,
            inflight_budget: None,
        })
    }

    /// The same config with an in-flight time budget (`None` removes it).
    pub fn with_inflight_budget(self, budget: Option<Nanos>) -> LaunchConfig {
        LaunchConfig {
            inflight_budget: budget.filter(|b| *b > Nanos::ZERO),
            ..self
        }
    }

    /// Most commands in flight at once.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// Commands between synchronization points.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Most estimated execution time in flight, if bounded.
    pub fn inflight_budget(&self) -> Option<Nanos> {
        self.inflight_budget
    }
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(LaunchConfig::new(8, 4).is_ok());
        assert!(LaunchConfig::new(1, 1).is_ok());
        assert_eq!(
            LaunchConfig::new(2, 4),
            Err(CoreError::InvalidLaunchConfig {
                threshold: 2,
                batch: 4
            })
        );
        assert!(LaunchConfig::new(4, 0).is_err());
        let c = LaunchConfig::DEFAULT.with_inflight_budget(Some(Nanos::ZERO));
        assert_eq!(c.inflight_budget(), None);
    }
}
