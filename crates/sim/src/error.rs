//! The simulator's one error ([`ScenarioError`]): a scenario file that could not be read or is
//! inconsistent, or a spec (from a file or built in code) that a run cannot start from.

use thiserror::Error;
use xsched_core::CoreError;

/// A scenario that could not be read or is inconsistent, or a spec a run cannot start from.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {file}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Malformed or inconsistent content.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The core rejected a queue of a spec (unknown policy, unsupported level, ...).
    #[error("queue `{queue}`")]
    Core {
        /// The queue concerned (`*`: all of them, for the policy).
        queue: String,
        /// What the core said.
        source: CoreError,
    },
    /// A spec whose index points nowhere, or whose workload cannot run.
    #[error("{0}")]
    Spec(String),
}
