//! Errors the core reports. Invalid input is an error, never a silent adjustment. Also the one
//! way xsched's libraries print an error with its causes ([`chain_text`]).

use crate::ids::QueueId;
use crate::level::{InvalidLevel, Level};
use thiserror::Error;

/// Everything that can go wrong in the core.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A launch configuration broke `threshold >= batch >= 1`.
    #[error(
        "invalid launch config: threshold {threshold} and batch {batch} must satisfy threshold >= batch >= 1"
    )]
    InvalidLaunchConfig {
        /// The requested in-flight threshold.
        threshold: u32,
        /// The requested batch size.
        batch: u32,
    },
    /// A level number outside 1..=3.
    #[error(transparent)]
    InvalidLevel(#[from] InvalidLevel),
    /// A level the backend or device does not offer.
    #[error("level {requested} is not supported: the device offers up to {max}")]
    UnsupportedLevel {
        /// What was asked for.
        requested: Level,
        /// The highest level available.
        max: Level,
    },
    /// A queue the scheduler does not know.
    #[error("unknown queue {0}")]
    UnknownQueue(QueueId),
    /// A queue registered twice.
    #[error("queue {0} is already registered")]
    DuplicateQueue(QueueId),
    /// A policy name nobody registered.
    #[error("unknown policy `{name}`; known: {known}")]
    UnknownPolicy {
        /// The whole name asked for.
        name: String,
        /// Every registered name, comma-separated (from the policy table, which this file
        /// cannot read: the table's policies report errors of this type).
        known: String,
    },
    /// A registered policy given an argument it cannot take.
    #[error("policy `{name}`: {reason}")]
    BadPolicyArgument {
        /// The whole name asked for (`hpf:min-share=0.9`).
        name: String,
        /// What the argument must be.
        reason: &'static str,
    },
    /// A hint whose value makes no sense (zero share, zero slice, ...).
    #[error("invalid hint: {0}")]
    InvalidHint(&'static str),
    /// A policy that protects queues with an SLO, and no queue has one.
    #[error(
        "policy `{policy}` protects queues that have an SLO hint (XSCHED_SLO_US), and none of the {queues} queue(s) has one"
    )]
    NoSloQueue {
        /// The policy.
        policy: &'static str,
        /// How many queues were checked.
        queues: usize,
    },
}

/// `e` and each of its sources in turn, joined by `": "`: the whole story of an error whose
/// message leaves its cause to [`source`](std::error::Error::source) (as the CLI prints one),
/// for a library that must hand an error on as text (a log line, a C caller, a peer).
pub fn chain_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that leaves its cause to `source`.
    #[derive(Debug, Error)]
    #[error("registering")]
    struct Outer(#[source] CoreError);

    #[test]
    fn the_chain_text_names_every_cause_once() {
        let e = Outer(CoreError::UnknownQueue(QueueId(3)));
        assert_eq!(chain_text(&e), "registering: unknown queue q3");
        let level = CoreError::from(InvalidLevel(7));
        assert_eq!(
            chain_text(&level),
            level.to_string(),
            "transparent: one message"
        );
    }
}
