//! The crate's one error, [`SchedulerError`]: why the scheduler refused a configuration
//! ([`RequestScheduler::new`](crate::RequestScheduler::new), an eviction rule's name), an input
//! ([`RequestScheduler::handle`](crate::RequestScheduler::handle)), or a request its policy
//! cannot order ([`RequestPolicySpec::stated_lengths`](crate::RequestPolicySpec::stated_lengths)).
//! In each case nothing changed. Also [`chain_text`], how the LLM crates print an error with its
//! causes where only text can go (a warning).

/// Why the scheduler refused a configuration, an input or a request (nothing changed).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SchedulerError {
    /// A configuration without an engine.
    #[error("at least one engine is needed")]
    NoEngine,
    /// A zero limit.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A policy that needs the true lengths, for a driver that does not know them.
    #[error(
        "policy `{0}` orders by noisy samples of the true answer lengths, which only a simulation knows"
    )]
    NeedsTruth(String),
    /// An engine-order horizon that is not a positive number of seconds.
    #[error("the engine order's horizon must be a positive number of seconds, not {0}")]
    Horizon(f64),
    /// A preemptive policy for a driver that cannot pause requests.
    #[error(
        "policy `{policy}` pauses running requests, which this driver cannot do; `{instead}` runs its order without pausing"
    )]
    CannotPause {
        /// The policy.
        policy: String,
        /// The same without pausing.
        instead: String,
    },
    /// An eviction rule that is not `none`, `one` or `all`.
    #[error("eviction `{0}` is not one of `none`, `one`, `all`")]
    UnknownEviction(String),
    /// An arrival with the id of a request still known.
    #[error("request {0} arrived twice")]
    Duplicate(u64),
    /// An input naming an engine beyond the configured ones.
    #[error("no engine {0}")]
    UnknownEngine(usize),
    /// An oracle's request that states no answer length
    /// ([`RequestPolicySpec::stated_lengths`](crate::RequestPolicySpec::stated_lengths)); the
    /// policy as written.
    #[error(
        "policy `{0}` orders by each request's stated answer length; send `ignore_eos: true` with `max_tokens`"
    )]
    NoStatedLength(String),
}

/// `e` and each error under it, joined by `: ` (for a warning that names the cause).
pub fn chain_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading x")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_cause_in_order() {
        let e = Outer(std::io::Error::other("disk gone"));
        assert_eq!(chain_text(&e), "reading x: disk gone");
        assert_eq!(
            chain_text(&SchedulerError::NoEngine),
            "at least one engine is needed"
        );
    }
}
