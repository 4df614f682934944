//! The scheduler's configuration: its engines, where requests wait, and the rules for classes
//! and tenants. Checked once, by [`RequestScheduler::new`](super::RequestScheduler::new).

use crate::error::SchedulerError;
use crate::policy::RequestPolicySpec;
use crate::route::Router;
use crate::service::ServiceModel;

/// What one engine allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineLimits {
    /// Requests admitted at once at most (its batch slots, or a configured limit).
    pub concurrency: usize,
    /// Its KV capacity in tokens, if known (expected-peak admission needs it).
    pub kv_tokens: Option<u64>,
    /// Tokens per KV block.
    pub block_tokens: u32,
}

/// Where requests wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One queue; an engine is chosen when the request is admitted.
    WhenFree,
    /// An engine is chosen on arrival; a queue per engine.
    AtArrival,
}

/// The scheduler's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The policy.
    pub policy: RequestPolicySpec,
    /// The engines, by index.
    pub engines: Vec<EngineLimits>,
    /// How an engine is picked.
    pub router: Router,
    /// Where requests wait.
    pub placement: Placement,
    /// Requests waiting at most; an arrival beyond it is shed.
    pub max_waiting: usize,
    /// Where service times come from.
    pub service: ServiceModel,
    /// Whether the driver can pause a running request (preemptive policies need it).
    pub can_pause: bool,
    /// Whether the driver knows each request's true answer length (a simulator does): policies
    /// that order by noisy samples of it need it. A driver that does not gives the oracles the
    /// length a request states ([`RequestPolicySpec::stated_lengths`]).
    pub knows_truth: bool,
    /// Tenants' shares and the shedding of sheddable classes.
    pub fairness: Fairness,
    /// Learn each engine's concurrency from its throughput (`learn.rs`): admission keeps within
    /// the learned limit, never above [`EngineLimits::concurrency`] or the engine's slots.
    pub learn_concurrency: bool,
    /// Order at the engines (`engine_order.rs`): each is sent every request at once, up to what
    /// it holds, with a number for its own priority queue (`None`: order in the scheduler's
    /// queue, and admit within each engine's concurrency).
    pub engine_order: Option<super::EngineOrder>,
}

/// Classes and tenants: requests wait in lanes, the highest class first, tenants within a class
/// sharing by weighted tokens (`lanes.rs`). A class below 0 is sheddable.
#[derive(Clone, Debug, PartialEq)]
pub struct Fairness {
    /// Each tenant's weight in its share of service (a tenant beyond the list weighs 1).
    pub weights: Vec<f64>,
    /// Each tenant's most requests waiting or running at once (`None`, or a tenant beyond the
    /// list: no limit); an arrival past it is shed ([`ShedReason::TenantLimit`](
    /// crate::ShedReason::TenantLimit)).
    pub tenant_limits: Vec<Option<usize>>,
    /// A sheddable arrival that cannot be admitted at once is shed while this many sheddable
    /// requests wait already (`usize::MAX`: never for that reason).
    pub sheddable_waiting: usize,
    /// Sheddable requests are not admitted to an engine that runs a request above the standard
    /// class (class above 0), so such a request has the engine without sheddable company.
    pub sheddable_apart: bool,
    /// Sheddable requests are not admitted to an engine while a request above the standard class
    /// there waits for its first token (known from [`Input::Progress`](super::Input::Progress)), so no sheddable prompt
    /// is prefilled in the same batch as its own; and, while requests above the standard class
    /// are about (one arrived within [`HIGH_CLASS_WINDOW`]), nor while another sheddable request
    /// there whose first token will be reported ([`Arrival::reports_first_token`](super::Arrival::reports_first_token)) waits for it:
    /// sheddable prompts are then prefilled one at a time, so a request above them that arrives
    /// waits behind at most one (an engine cannot stop a batch it has begun).
    pub sheddable_after_first_token: bool,
    /// What a request above the standard class that cannot be admitted at once does to running
    /// sheddable requests ([`Decision::Evict`](crate::Decision::Evict) with
    /// [`EvictReason::Displaced`](crate::EvictReason::Displaced)).
    pub eviction: Eviction,
}

/// What a request above the standard class (class above 0) does to running sheddable requests
/// when it cannot be admitted at once: with a TTFT deadline, only once waiting would miss it
/// (the moment its deadline guard puts it first; a deadline it cannot meet counts as none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Eviction {
    /// Nothing: it waits for a slot.
    None,
    /// The sheddable request admitted last is evicted (it has had the least service).
    #[default]
    One,
    /// Every running sheddable request is evicted.
    All,
}

impl std::str::FromStr for Eviction {
    type Err = SchedulerError;

    /// `none`, `one` or `all`.
    fn from_str(s: &str) -> Result<Eviction, SchedulerError> {
        match s {
            "none" => Ok(Eviction::None),
            "one" => Ok(Eviction::One),
            "all" => Ok(Eviction::All),
            other => Err(SchedulerError::UnknownEviction(other.to_string())),
        }
    }
}

impl Eviction {
    /// How many running sheddable requests one waiting request evicts.
    pub(crate) fn victims(self) -> usize {
        match self {
            Eviction::None => 0,
            Eviction::One => 1,
            Eviction::All => usize::MAX,
        }
    }
}

/// Seconds after a request above the standard class arrives during which sheddable prompts are
/// prefilled one at a time ([`Fairness::sheddable_after_first_token`]); without such requests
/// sheddable ones are admitted as fast as slots free.
pub const HIGH_CLASS_WINDOW: f64 = 30.0;

impl Default for Fairness {
    /// Every tenant alike; sheddable requests shed only when the queue is full, and run beside
    /// any class.
    fn default() -> Fairness {
        Fairness {
            weights: Vec::new(),
            tenant_limits: Vec::new(),
            sheddable_waiting: usize::MAX,
            sheddable_apart: false,
            sheddable_after_first_token: false,
            eviction: Eviction::None,
        }
    }
}

impl Fairness {
    /// The default shares with `eviction`, and the admission rule that goes with it: under
    /// [`Eviction::One`] no sheddable request joins an engine while a higher class's request
    /// there waits for its first token (so no sheddable prompt shares its prefill's batch);
    /// under [`Eviction::All`] none joins one that runs a higher class's request at all.
    pub fn with_eviction(eviction: Eviction) -> Fairness {
        Fairness {
            sheddable_apart: eviction == Eviction::All,
            sheddable_after_first_token: eviction == Eviction::One,
            eviction,
            ..Fairness::default()
        }
    }
}

impl Config {
    /// Whether the scheduler can run on it: at least one engine, no zero limit, a positive
    /// horizon, and a policy the driver can follow.
    pub(super) fn check(&self) -> Result<(), SchedulerError> {
        if self.engines.is_empty() {
            return Err(SchedulerError::NoEngine);
        }
        if self.engines.iter().any(|e| e.concurrency == 0) {
            return Err(SchedulerError::Zero("an engine's concurrency"));
        }
        if let Some(o) = self.engine_order {
            if o.holds == 0 {
                return Err(SchedulerError::Zero("what an engine that orders holds"));
            }
            if !(o.horizon_s.is_finite() && o.horizon_s > 0.0) {
                return Err(SchedulerError::Horizon(o.horizon_s));
            }
        }
        if self.max_waiting == 0 {
            return Err(SchedulerError::Zero("the queue bound"));
        }
        if matches!(self.policy.source, crate::PredictionSource::Noisy(_)) && !self.knows_truth {
            return Err(SchedulerError::NeedsTruth(self.policy.to_string()));
        }
        if self.policy.preemptive && !self.can_pause {
            let instead = RequestPolicySpec {
                preemptive: false,
                ..self.policy
            };
            return Err(SchedulerError::CannotPause {
                policy: self.policy.to_string(),
                instead: instead.to_string(),
            });
        }
        Ok(())
    }
}
