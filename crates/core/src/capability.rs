//! The capability table a backend or device declares: what it can do, stated, so that an
//! unsupported request fails clearly instead of being silently downgraded.

use crate::error::CoreError;
use crate::level::Level;
use serde::{Deserialize, Serialize};

/// What a backend offers for one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Highest preemption level implemented.
    pub max_level: Level,
    /// How the hardware queue behaves between processes without xsched (FIFO, time slices, ...).
    pub native_arbitration: String,
    /// The unit a Level-3 preemption stops at ("instruction", "tile checkpoint", "none", ...).
    pub preemption_unit: String,
    /// Whether a Level-3 interrupt keeps the command's progress (false: restart if idempotent).
    pub keeps_state: bool,
    /// Whether the hardware has its own queue priorities.
    pub hardware_priority: bool,
}

impl Capabilities {
    /// `Ok` if `level` is available, else a typed error naming the maximum.
    pub fn check_level(&self, level: Level) -> Result<(), CoreError> {
        if level <= self.max_level {
            Ok(())
        } else {
            Err(CoreError::UnsupportedLevel {
                requested: level,
                max: self.max_level,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_check_never_downgrades() {
        let caps = Capabilities {
            max_level: Level::Deactivate,
            native_arbitration: "fifo".into(),
            preemption_unit: "command".into(),
            keeps_state: false,
            hardware_priority: false,
        };
        assert!(caps.check_level(Level::Block).is_ok());
        assert!(caps.check_level(Level::Deactivate).is_ok());
        assert_eq!(
            caps.check_level(Level::Interrupt),
            Err(CoreError::UnsupportedLevel {
                requested: Level::Interrupt,
                max: Level::Deactivate
            })
        );
    }
}
