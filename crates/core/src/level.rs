//! Preemption levels: the contract a backend offers (XSched §3).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How far a suspend reaches into the hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Level {
    /// Level 1: stop launching; commands already in the hardware queue drain.
    Block = 1,
    /// Level 2: also hold queued hardware commands; only the running one finishes.
    Deactivate = 2,
    /// Level 3: also stop the running command; it resumes from its saved point (or restarts).
    Interrupt = 3,
}

impl Level {
    /// All levels, lowest first.
    pub const ALL: [Level; 3] = [Level::Block, Level::Deactivate, Level::Interrupt];

    /// The level's number, 1 to 3.
    pub fn number(self) -> u8 {
        self as u8
    }
}

/// A level number outside 1..=3. Its own type (not a `CoreError`) so that the core's error
/// type can name levels without the two files importing each other.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("invalid preemption level {0}: levels are 1 (block), 2 (deactivate), 3 (interrupt)")]
pub struct InvalidLevel(pub u8);

impl TryFrom<u8> for Level {
    type Error = InvalidLevel;
    fn try_from(n: u8) -> Result<Level, InvalidLevel> {
        match n {
            1 => Ok(Level::Block),
            2 => Ok(Level::Deactivate),
            3 => Ok(Level::Interrupt),
            _ => Err(InvalidLevel(n)),
        }
    }
}

impl From<Level> for u8 {
    fn from(l: Level) -> u8 {
        l.number()
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "L{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::try_from(2).ok(), Some(Level::Deactivate));
        assert!(Level::try_from(0).is_err());
        assert!(Level::try_from(4).is_err());
        assert!(Level::Block < Level::Interrupt);
        assert_eq!(u8::from(Level::Interrupt), 3);
    }
}
