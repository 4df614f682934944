//! Priority classes and tenants: what a request's headers and body say of who sent it and how
//! much it matters, and the file (`--classes FILE`, TOML) that names them. The defaults need no
//! file.
//!
//! A request's class (an integer, **higher wins, below 0 sheddable**, as llm-d's
//! `InferenceObjective` priority), from the first of:
//! 1. `x-llm-d-inference-objective: NAME`: a class by name ([`BUILT_IN`], or the file's);
//! 2. `x-dynamo-request-priority: N` (NVIDIA Dynamo's, an integer, higher wins);
//! 3. the body's `priority` (vLLM's and LiteLLM's field, **lower wins**): its negation, so
//!    vLLM's `priority: 1` (less urgent than the default 0) is class −1 here;
//! 4. the file's `default_class` (else `standard`, 0).
//!
//! Its deadline: `x-llm-d-slo-ttft-ms: N` (llm-d's), the first token wanted within N ms of
//! arrival (1 to [`MAX_SLO_MS`]). Once waiting leaves less slack than a first token takes alone
//! (measured from answers; half the deadline until measured), the request goes before the rest
//! of its class,
//! and a class above 0 evicts a running sheddable request then (`eviction`), not at once as it
//! does without a deadline. A deadline shorter than the first token takes alone (once that is
//! measured) cannot be met and counts as none. A deadline reorders only its own class and
//! tenant's requests (other tenants keep their token shares), so it grants a client no more
//! than the class header already does.
//!
//! Its tenant: `x-llm-d-inference-fairness-id: ID` (else `default`). A tenant the file names
//! has its weight and limit; any other id becomes a tenant of weight 1 as it is first seen, up
//! to `max_tenants`, after which unnamed ids share one tenant, `other` (so no client can grow the
//! gateway's memory or its metrics by inventing ids). Tenants share the engines by weighted
//! tokens (VTC, in `xsched-llm-core`'s lanes); a tenant with `max_requests` requests waiting or
//! in flight gets a 429 naming that limit.
//!
//! ```toml
//! default_class = "standard"   # optional
//! max_tenants = 64             # optional
//! sheddable_waiting = 8        # optional: a sheddable request waits beside at most this many
//! eviction = "one"             # optional: what a class above 0 that finds no free slot does
//!                              # to running sheddable requests: "one" (the default) evicts the
//!                              # one admitted last (and admits none beside it until its first
//!                              # token), "all" every one (and none runs beside it), "none" waits
//!
//! [classes]
//! interactive = 10
//! batch = -1                   # below 0: sheddable
//!
//! [tenants.web]
//! weight = 3
//! [tenants.nightly]
//! weight = 1
//! max_requests = 32
//! ```

mod file;
mod headers;
mod table;

pub use file::InvalidClasses;
pub(crate) use headers::{BadClass, ttft_slo_of};
pub use headers::{MAX_SLO_MS, OBJECTIVE_HEADER, PRIORITY_HEADER, SLO_TTFT_HEADER, TENANT_HEADER};
pub use table::{BUILT_IN, Classes, DEFAULT_TENANT, MAX_NAME, MAX_TENANTS, OTHER_TENANT};

#[cfg(test)]
mod tests;
