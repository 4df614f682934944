//! What the core knows about a command: not its payload, only what scheduling needs.

use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// Scheduling-relevant facts about one command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandMeta {
    /// Declared execution-time estimate; zero means "unknown, use the queue's measured average".
    pub estimate: Nanos,
    /// Running it twice gives the same result, so Level 3 may restart it instead of restoring.
    pub idempotent: bool,
    /// The backend can hold it in the hardware queue without starting it (Level 2).
    pub deactivatable: bool,
    /// It can be split into slices of bounded duration (a kernel over a grid of tiles).
    pub sliceable: bool,
}

impl CommandMeta {
    /// A command with a known duration and no special properties.
    pub fn with_estimate(estimate: Nanos) -> CommandMeta {
        CommandMeta {
            estimate,
            ..CommandMeta::default()
        }
    }
}
