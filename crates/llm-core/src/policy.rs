//! Request policies by name: one table row each, parsed once where text enters (a flag, a
//! config) into a typed [`RequestPolicySpec`] that every driver carries.
//!
//! A policy is an *order* of the waiting queue, where its predictions come from (a
//! [`PredictionSource`]), whether the aging guard protects long requests, how requests are *admitted*
//! to an engine ([`KvAdmission`]), and whether it may pause a running request to let a better
//! one in (`preemptive`; the engine simulator can, the gateway cannot).
//!
//! | name | order | predictions | admission | preempts |
//! |---|---|---|---|---|
//! | `fcfs` | arrival (vLLM's default) | none | engine's | no |
//! | `priority` | higher `priority` first, then arrival | none | engine's | no |
//! | `sagesched` | highest Gittins index of the predicted cost `O²/2 + I·O` over the quanta the scheduler can grant (see below) | history | KV peak | no |
//! | `sagesched-time` | the same over the predicted time `a·I + b·O` (measured rates) | history | KV peak | no |
//! | `sagesched-quanta` | the full Gittins index, every quantum, though the admission it orders cannot preempt (the earlier rule, kept to compare) | history | KV peak | no |
//! | `sagesched-length` | as `sagesched` over the predicted output length | history | KV peak | no |
//! | `sagesched-nohistory` | as `sagesched` | the prior alone | KV peak | no |
//! | `sagesched-noaging` | as `sagesched`, no aging guard | history | KV peak | no |
//! | `sagesched-oracle` | as `sagesched` over the true length (one atom), no guard | truth | KV peak | no |
//! | `ssjf` | shortest predicted mean output first | history | engine's | no |
//! | `trail` | least predicted remaining output, refined as tokens come; preemptible until 0.8 × its first prediction | history | engine's | yes |
//! | `fastserve` | skip-join MLFQ (quantum 10 ms · 2^level), own starvation guard | none | engine's | yes |
//! | `srpt-oracle` | least remaining true cost | truth | KV peak | no |
//!
//! Truth is what a simulation knows; the gateway knows it only where a request states its
//! answer's length (`ignore_eos` with `max_tokens`, as benchmarks send), so there the oracles
//! measure the ceiling of ordering on a real engine and refuse requests that state none.
//!
//! The Gittins index is the best completion probability per unit of expected work over any
//! service quantum the scheduler may grant before it decides again. A scheduler that can pause
//! a running request (`:preempt=on`) may grant any quantum: the full index, given the service
//! attained. One that admits a request to run to its end can grant only the whole request, and
//! the index over that one quantum is `1 / E[S − a | S > a]`: shortest expected remaining size
//! first, the optimal non-preemptive order for known size distributions. The full index in
//! non-preemptive admission (`sagesched-quanta`) ranks by quanta that admission never grants,
//! and was worse where requests queue.
//!
//! `sagesched-noise-<σ>`: `sagesched` over ten samples of the true length × `exp(N(0, σ²))`
//! (the prediction-quality study). Any name takes `:admit=engine|peak` and
//! `:preempt=on|off` to change those two columns (`ssjf:admit=peak`, `sagesched:preempt=on`),
//! and one that predicts from the history takes `:predict=model` to predict from the length
//! model instead (an online linear model of the log length over the prompt's words, which
//! ranks answers better where a few words say how long they run; `xsched-llm-predict`'s
//! `regression.rs`).

use crate::error::SchedulerError;
use crate::gittins::SizeDistribution;
use std::fmt;
use std::str::FromStr;

/// How the waiting queue is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Arrival order.
    Fcfs,
    /// Higher priority first, then arrival.
    Priority,
    /// Highest Gittins index of the size distribution given the size attained, over the
    /// quanta the scheduler can grant (every quantum if it may pause, else the whole request).
    Gittins(Size),
    /// Highest Gittins index over every quantum, whether or not the scheduler may pause.
    GittinsAnyQuantum(Size),
    /// Shortest predicted mean output first.
    Ssjf,
    /// Least predicted remaining output (TRAIL).
    Trail,
    /// Skip-join multi-level feedback queue (FastServe).
    FastServe,
    /// Least remaining size, the size known exactly (needs [`PredictionSource::Truth`]).
    Srpt,
}

/// What a request's size is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// SageSched's cost `O²/2 + I·O`.
    Cost,
    /// Output tokens.
    Length,
    /// Predicted seconds on the engine, `a·I + b·O`.
    Time,
}

/// Where a policy's output-length predictions come from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PredictionSource {
    /// It predicts nothing.
    None,
    /// The history predictor.
    History,
    /// The length model: an online linear model of the log length over the prompt's words
    /// (`:predict=model`).
    Model,
    /// The fixed prior alone.
    Prior,
    /// The true length (simulation only).
    Truth,
    /// Ten samples of the true length × `exp(N(0, σ²))` (simulation only).
    Noisy(f64),
}

/// How requests are admitted to an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvAdmission {
    /// As the engine admits by itself (vLLM): whenever it has a free slot and KV blocks for the
    /// prompt's first chunk.
    Engine,
    /// Also only while the expected KV occupancy the engine's requests are predicted to reach,
    /// the new one included, stays within its KV capacity times a learned headroom
    /// (`admit.rs`).
    Peak,
}

/// A policy, typed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestPolicySpec {
    /// The table row's name.
    pub name: &'static str,
    /// The order of the waiting queue.
    pub order: Order,
    /// Where predictions come from.
    pub source: PredictionSource,
    /// Whether the aging guard protects long requests (FastServe has its own guard).
    pub aging: bool,
    /// How requests are admitted.
    pub admission: KvAdmission,
    /// Whether it pauses running requests for better waiting ones.
    pub preemptive: bool,
}

/// One row of the table: a policy as its name gives it.
const fn row(
    name: &'static str,
    order: Order,
    source: PredictionSource,
    aging: bool,
    admission: KvAdmission,
    preemptive: bool,
) -> RequestPolicySpec {
    RequestPolicySpec {
        name,
        order,
        source,
        aging,
        admission,
        preemptive,
    }
}

use KvAdmission::{Engine, Peak};

/// Every policy by name (the module docs' table).
pub const TABLE: &[RequestPolicySpec] = &[
    row(
        "fcfs",
        Order::Fcfs,
        PredictionSource::None,
        false,
        Engine,
        false,
    ),
    row(
        "priority",
        Order::Priority,
        PredictionSource::None,
        false,
        Engine,
        false,
    ),
    row(
        "sagesched",
        Order::Gittins(Size::Cost),
        PredictionSource::History,
        true,
        Peak,
        false,
    ),
    row(
        "sagesched-time",
        Order::Gittins(Size::Time),
        PredictionSource::History,
        true,
        Peak,
        false,
    ),
    row(
        "sagesched-quanta",
        Order::GittinsAnyQuantum(Size::Cost),
        PredictionSource::History,
        true,
        Peak,
        false,
    ),
    row(
        "sagesched-length",
        Order::Gittins(Size::Length),
        PredictionSource::History,
        true,
        Peak,
        false,
    ),
    row(
        "sagesched-nohistory",
        Order::Gittins(Size::Cost),
        PredictionSource::Prior,
        true,
        Peak,
        false,
    ),
    row(
        "sagesched-noaging",
        Order::Gittins(Size::Cost),
        PredictionSource::History,
        false,
        Peak,
        false,
    ),
    row(
        "sagesched-oracle",
        Order::Gittins(Size::Cost),
        PredictionSource::Truth,
        false,
        Peak,
        false,
    ),
    row(
        "ssjf",
        Order::Ssjf,
        PredictionSource::History,
        true,
        Engine,
        false,
    ),
    row(
        "trail",
        Order::Trail,
        PredictionSource::History,
        true,
        Engine,
        true,
    ),
    row(
        "fastserve",
        Order::FastServe,
        PredictionSource::None,
        false,
        Engine,
        true,
    ),
    row(
        "srpt-oracle",
        Order::Srpt,
        PredictionSource::Truth,
        false,
        Peak,
        false,
    ),
];

/// The names the sweeps run by default (`all`): the baselines, SageSched, the oracle and the
/// ablations; `priority` and `sagesched-time` order by what a simulated workload lacks
/// (priorities, measured rates) and are left to the gateway.
pub const ALL: &[&str] = &[
    "fcfs",
    "fastserve",
    "ssjf",
    "trail",
    "sagesched",
    "srpt-oracle",
    "sagesched-quanta",
    "sagesched-length",
    "sagesched-nohistory",
    "sagesched-noaging",
    "sagesched-oracle",
];

/// The prefix of the prediction-quality study's names: `sagesched-noise-0.5`.
pub const NOISE_PREFIX: &str = "sagesched-noise-";

/// Why a policy's name was refused: the [`FromStr`] error of [`RequestPolicySpec`] (and of
/// [`parse_list`]), which clap's value parsers and `parse()` return (see the crate's "Errors").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No row of that name.
    #[error("unknown policy `{0}`; known: {known}, and {NOISE_PREFIX}<sigma> (e.g. {NOISE_PREFIX}0.5)", known = names().collect::<Vec<_>>().join(", "))]
    Unknown(String),
    /// A parameter it cannot take.
    #[error(
        "policy `{policy}`: `{parameter}` is not admit=engine|peak, preempt=on|off or predict=history|model"
    )]
    BadParameter {
        /// The policy.
        policy: String,
        /// The parameter as given.
        parameter: String,
    },
    /// `predict=` on a policy that does not predict from what answers taught it.
    #[error(
        "policy `{0}` does not learn its predictions from past answers, so `predict=` cannot change them"
    )]
    NotLearned(String),
}

/// Every row's name.
pub fn names() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|p| p.name)
}

/// The policies a command's list names, each with the name it was given by: every one of
/// [`ALL`] where an item is `all`, else each item as [`FromStr`] reads it.
pub fn parse_list<S: AsRef<str>>(
    items: &[S],
) -> Result<Vec<(&str, RequestPolicySpec)>, PolicyError> {
    let names: Vec<&str> = if items.iter().any(|item| item.as_ref() == "all") {
        ALL.to_vec()
    } else {
        items.iter().map(|item| item.as_ref()).collect()
    };
    names
        .into_iter()
        .map(|name| name.parse::<RequestPolicySpec>().map(|spec| (name, spec)))
        .collect()
}

impl RequestPolicySpec {
    /// First come, first served: vLLM's default, every comparison's baseline.
    pub const FCFS: RequestPolicySpec = TABLE[0];

    /// The row called `name`.
    pub fn row(name: &str) -> Option<RequestPolicySpec> {
        TABLE.iter().copied().find(|p| p.name == name)
    }

    /// Whether it orders by predicted lengths (a driver must then predict every arrival).
    pub fn predicts(&self) -> bool {
        !matches!(self.source, PredictionSource::None)
    }

    /// What it orders a request by where its driver knows no truth but the answer length the
    /// request states (a benchmark's `ignore_eos` with its bound, `stated`): under an oracle,
    /// that length, or why a request stating none is refused; under any other policy, nothing
    /// (its driver predicts, or the policy needs no length).
    pub fn stated_lengths(
        &self,
        stated: Option<u32>,
    ) -> Result<Option<SizeDistribution>, SchedulerError> {
        if self.source != PredictionSource::Truth {
            return Ok(None);
        }
        stated
            .and_then(|n| SizeDistribution::point(f64::from(n.max(1))))
            .map(Some)
            .ok_or_else(|| SchedulerError::NoStatedLength(self.to_string()))
    }

    /// The row this spec was built from (its defaults).
    fn base(&self) -> RequestPolicySpec {
        RequestPolicySpec::row(self.name).unwrap_or(RequestPolicySpec {
            source: PredictionSource::Noisy(0.0),
            ..*self
        })
    }
}

impl FromStr for RequestPolicySpec {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<RequestPolicySpec, PolicyError> {
        let mut parts = text.trim().split(':');
        let name = parts.next().unwrap_or_default();
        let mut spec = match RequestPolicySpec::row(name) {
            Some(p) => p,
            None => {
                let sigma = name
                    .strip_prefix(NOISE_PREFIX)
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
                RequestPolicySpec {
                    name: "sagesched-noise",
                    source: PredictionSource::Noisy(sigma),
                    ..TABLE[2]
                }
            }
        };
        for parameter in parts.flat_map(|p| p.split(',')) {
            match parameter.trim() {
                "admit=engine" => spec.admission = KvAdmission::Engine,
                "admit=peak" => spec.admission = KvAdmission::Peak,
                "preempt=on" => spec.preemptive = true,
                "preempt=off" => spec.preemptive = false,
                p @ ("predict=history" | "predict=model") => {
                    if !matches!(
                        spec.source,
                        PredictionSource::History | PredictionSource::Model
                    ) {
                        return Err(PolicyError::NotLearned(name.to_string()));
                    }
                    spec.source = if p == "predict=model" {
                        PredictionSource::Model
                    } else {
                        PredictionSource::History
                    };
                }
                other => {
                    return Err(PolicyError::BadParameter {
                        policy: name.to_string(),
                        parameter: other.to_string(),
                    });
                }
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for RequestPolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            PredictionSource::Noisy(sigma) => write!(f, "{NOISE_PREFIX}{sigma}")?,
            _ => f.write_str(self.name)?,
        }
        let base = self.base();
        let mut sep = ':';
        if self.admission != base.admission {
            let admit = match self.admission {
                KvAdmission::Engine => "engine",
                KvAdmission::Peak => "peak",
            };
            write!(f, "{sep}admit={admit}")?;
            sep = ',';
        }
        if self.preemptive != base.preemptive {
            let on = if self.preemptive { "on" } else { "off" };
            write!(f, "{sep}preempt={on}")?;
            sep = ',';
        }
        if self.source != base.source && !matches!(self.source, PredictionSource::Noisy(_)) {
            let source = match self.source {
                PredictionSource::Model => "model",
                _ => "history",
            };
            write!(f, "{sep}predict={source}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
