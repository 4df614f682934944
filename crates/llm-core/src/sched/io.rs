//! The scheduler's vocabulary with its driver: what happened ([`Input`]) and what to do
//! ([`Decision`]); an input it refuses gets a [`SchedulerError`](crate::SchedulerError).

use crate::gittins::SizeDistribution;
use crate::prefix::Prefix;
use crate::service::Served;
pub use crate::watch::EngineReport;
use crate::watch::Scrape;

/// A request arriving.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arrival {
    /// Its id (unique among the requests the scheduler holds).
    pub id: u64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// The output bound it asked for.
    pub max_tokens: Option<u32>,
    /// Its priority class: higher first under every policy, below 0 sheddable (0 by default).
    pub priority: i32,
    /// Its tenant, by index (0 by default).
    pub tenant: usize,
    /// Its predicted output lengths (`None`: the prior).
    pub lengths: Option<SizeDistribution>,
    /// Seconds from its arrival to its first token that its client asked for (llm-d's
    /// `x-llm-d-slo-ttft-ms`): once waiting leaves less slack than its first token takes
    /// alone ([`ServiceModel::slo_lead`](crate::service::ServiceModel::slo_lead): half the deadline while that is unmeasured), it goes
    /// before every request of its class that has not reached its own deadline or aging guard.
    pub ttft_slo: Option<f64>,
    /// Its prompt's prefix, as hashes of whole blocks, each chaining the ones before it
    /// ([`crate::prefix`]): the `prefix-affinity` router sends it where most of it was sent.
    pub prefix: Prefix,
    /// Whether its driver reports its first token as it comes ([`Input::Progress`]; a streamed
    /// answer whose events are counted): only then may it hold other sheddable requests back
    /// while it waits for it ([`Fairness::sheddable_after_first_token`](crate::Fairness::sheddable_after_first_token)).
    pub reports_first_token: bool,
    /// The engines it may be admitted to (empty: any): a proxy's subset hint, which the
    /// endpoint picker passes on. It waits, in its place, until one of them fits.
    pub engines: Vec<usize>,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A request arrived.
    Arrived(Arrival),
    /// An admitted request has generated this many output tokens.
    Progress {
        /// The request.
        id: u64,
        /// Tokens generated so far.
        generated: u32,
    },
    /// A request left: its answer ended, its client went away, or it failed.
    Done {
        /// The request.
        id: u64,
    },
    /// The engine counted the request's prompt as `tokens`: its tenant, charged the estimate at
    /// admission, is charged the difference (a prompt estimated from its characters misses the
    /// chat template's tokens, so short prompts, which a shortest-first order admits more of,
    /// would be under-charged). Only the last admission's charge is corrected (a request paused
    /// before its first token was charged the estimate at each admission before).
    Prompt {
        /// The request.
        id: u64,
        /// Its prompt's tokens, as the engine counted them.
        tokens: u32,
    },
    /// The engine preempted an admitted request (dropped its KV; it resumes it itself).
    Preempted {
        /// The request.
        id: u64,
    },
    /// An engine's report.
    Engine {
        /// The engine.
        engine: usize,
        /// What it reported.
        report: EngineReport,
    },
    /// An answer's measured service (for measured service models).
    Served(Served),
    /// An answer from `engine` ended (before its [`Input::Done`]): with
    /// [`Config::learn_concurrency`](crate::Config::learn_concurrency), its learner counts it.
    Answered {
        /// The engine.
        engine: usize,
        /// Its output tokens.
        output_tokens: u32,
        /// Seconds from its admission to its end.
        service_s: f64,
    },
    /// The engine's own count of the tokens it generated since it started was read (vLLM's
    /// `generation_tokens_total`; a simulated engine's steps): with
    /// [`Config::learn_concurrency`](crate::Config::learn_concurrency), its learner measures by
    /// it.
    Generated {
        /// The engine.
        engine: usize,
        /// Tokens generated since it started.
        tokens: f64,
    },
    /// A request's answer has begun reaching its client (its first byte passed): it can no
    /// longer be taken back from its engine ([`Input::Responsive`]).
    Answering {
        /// The request.
        id: u64,
    },
    /// An engine stopped answering at all (its metrics and probes get no answer), or answers
    /// again. Unresponsive, it is sent nothing, and the requests there whose answer has not
    /// begun are taken back ([`EvictReason::Unresponsive`]) and placed on an engine that
    /// answers, or shed if none does.
    Responsive {
        /// The engine.
        engine: usize,
        /// Whether it answers.
        responsive: bool,
    },
    /// Whether an engine orders its own queue by the numbers it is sent (with
    /// [`Config::engine_order`](crate::Config::engine_order) every engine starts so): one that
    /// refused a number is ordered and admitted to by the scheduler from now.
    EngineOrders {
        /// The engine.
        engine: usize,
        /// Whether it orders.
        orders: bool,
    },
    /// What a scrape of an engine's metrics (and slots) brought back (`crate::watch`): it may
    /// be saturated, its metrics stale, or it silent.
    Scraped {
        /// The engine.
        engine: usize,
        /// What came back.
        scrape: Scrape,
    },
    /// A request to an engine failed at the transport level (refused, dropped, no first byte in
    /// time): it is ejected for a backoff (`crate::watch`).
    Failed {
        /// The engine.
        engine: usize,
    },
    /// An engine answered a request (any status: it is alive); its backoff starts over.
    Replied {
        /// The engine.
        engine: usize,
    },
    /// An engine is taken out of admission by its operator (`up: false`) or put back
    /// (`up: true`); what runs there is not touched.
    Availability {
        /// The engine.
        engine: usize,
        /// Whether it may be sent requests.
        up: bool,
    },
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send the request to the engine.
    Admit {
        /// The request.
        id: u64,
        /// The engine.
        engine: usize,
    },
    /// Take the running request off the engine, for `reason`.
    Evict {
        /// The request.
        id: u64,
        /// Its engine.
        engine: usize,
        /// Why, and what becomes of it.
        reason: EvictReason,
    },
    /// Refuse the request, for `reason`.
    Shed {
        /// The request.
        id: u64,
        /// Why.
        reason: ShedReason,
    },
    /// The engine's learned concurrency changed ([`Config::learn_concurrency`](
    /// crate::Config::learn_concurrency)); admission keeps within it from now.
    Limit {
        /// The engine.
        engine: usize,
        /// Requests it may run at once.
        concurrency: usize,
    },
}

/// Why a running request is taken off its engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictReason {
    /// A preemptive policy pauses it for a better-ranked request: it waits again in the
    /// scheduler's queue and is admitted to the same engine later.
    Paused,
    /// A sheddable request, evicted for a waiting request above the standard class
    /// ([`Fairness::eviction`](crate::Fairness::eviction)): its driver ends it (its client is
    /// told to retry) and reports [`Input::Done`], which frees its slot.
    Displaced,
    /// Its engine stopped answering and its answer has not begun: it waits again in the
    /// scheduler's queue (first, by its rank) and is admitted to an engine that answers; its
    /// driver drops the request to the silent engine. Nothing reached its client, so nothing is
    /// sent twice.
    Unresponsive,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShedReason {
    /// The queue holds its bound ([`Config::max_waiting`](crate::Config::max_waiting)).
    QueueFull,
    /// A waiting sheddable request, displaced from a full queue by a higher class.
    Displaced,
    /// A sheddable request while the engines are saturated: it would wait beside more of its
    /// kind than [`Fairness::sheddable_waiting`](crate::Fairness::sheddable_waiting).
    Saturated,
    /// No engine answers at all (each is hung or gone).
    NoEngine,
    /// Its tenant holds its limit of requests waiting or running
    /// ([`Fairness::tenant_limits`](crate::Fairness::tenant_limits)).
    TenantLimit,
}

impl ShedReason {
    /// A short name, for logs, headers and metrics.
    pub fn name(self) -> &'static str {
        match self {
            ShedReason::QueueFull => "queue-full",
            ShedReason::Displaced => "displaced",
            ShedReason::Saturated => "saturated",
            ShedReason::NoEngine => "no-engine",
            ShedReason::TenantLimit => "tenant-limit",
        }
    }
}
