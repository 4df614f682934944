//! The scheduler: requests in, decisions out, time as an input (the quinn-proto shape the
//! XQueue core has). A driver feeds what happens ([`Input`]) with the time it happened and drains
//! [`Decision`]s after each call: admit request R to engine E, pause (evict) R on E, or shed R.
//! It never reads a clock, sleeps, or touches a socket: the engine simulator drives it in
//! virtual time, the gateway under a lock from its HTTP handlers.
//!
//! A decision round runs after every input that can change who may run (an arrival, a request
//! done, an engine's report). It serves the queue head first and never skips it: if the head
//! fits no engine, nothing behind it is admitted either (vLLM's rule). Fitting an engine
//! means a free slot (its concurrency), the room it last reported for its next step (prefill
//! tokens and free KV blocks for the prompt's first chunk), and under [`KvAdmission::Peak`] the
//! expected-peak rule of `admit.rs`. A preemptive policy that finds the head fitting nowhere
//! pauses the engine's worst-ranked running requests (those its order may pause, ranked worse
//! than the head) if, and only if, pausing them makes the head fit.
//!
//! Placement: [`Placement::WhenFree`] keeps one queue, and the router picks among the engines
//! that can take the head now (the gateway); [`Placement::AtArrival`] routes each request on
//! arrival and keeps a queue per engine (each engine orders its own requests).

mod arrival;
mod config;
mod displace;
mod engine_order;
mod io;
mod learning;
mod outside;
mod reclaim;
mod round;
mod waiting;

pub use config::{
    Config, ConfigError, EngineLimits, Eviction, Fairness, HIGH_CLASS_WINDOW, Placement,
};
pub use engine_order::{CLASS_LIMIT, CLASS_SPAN_MS, EngineOrder, engine_priority};
pub use io::{Arrival, Decision, EngineReport, EvictReason, Input, InputError, ShedReason};

use crate::admit::Headroom;
use crate::job::{Job, Place};
use crate::lanes::{Counters, Lanes, OUTPUT_TOKEN_WEIGHT};
use crate::learn::Learner;
use crate::order;
use crate::policy::RequestPolicySpec;
use crate::prefix::PrefixCache;
use crate::service::ServiceModel;
use crate::watch::Watched;
use std::collections::{BTreeMap, VecDeque};

/// The aging guard: a request still waiting this many times its predicted time alone on an
/// engine after it arrived goes before every request that has not aged.
pub const AGING_FACTOR: f64 = 100.0;

/// What the scheduler keeps of one engine.
#[derive(Debug)]
struct Engine {
    limits: EngineLimits,
    /// Requests admitted and not done, in admission order.
    admitted: Vec<u64>,
    /// Its last report, less what was admitted since.
    report: EngineReport,
    /// The predicted cost of what was sent to it and is not done: admitted, or (placed on
    /// arrival) routed there and waiting.
    cost: f64,
    headroom: Headroom,
    /// Whether expected-peak admission held a request back since the last completion.
    pressed: bool,
    /// Its own queue ([`Placement::AtArrival`]).
    queue: Lanes,
    /// Whether it may be sent requests.
    up: bool,
    /// The prompt prefixes sent to it (`prefix-affinity`).
    prefixes: PrefixCache,
    /// Its concurrency learner ([`Config::learn_concurrency`]).
    learner: Option<Learner>,
    /// Whether it answers at all (`reclaim.rs`).
    responsive: bool,
    /// Whether it orders its own queue by the numbers it is sent (`engine_order.rs`).
    orders: bool,
    /// What is seen of it from outside: metrics, failures, ejection (`outside.rs`).
    watch: Watched,
}

impl Engine {
    /// Whether it may be sent requests: up, answering, and not ejected.
    fn serves(&self) -> bool {
        self.up && self.responsive && self.watch.ejected_until().is_none()
    }

    /// Requests it runs at once: its limit, or its slots where it reports fewer, or the
    /// learned limit where that is fewer still.
    fn concurrency(&self) -> usize {
        let most = self.report.slots.map_or(self.limits.concurrency, |s| {
            s.clamp(1, self.limits.concurrency)
        });
        self.learner
            .as_ref()
            .map_or(most, |l| l.limit().clamp(1, most))
    }
}

/// The LLM request scheduler.
#[derive(Debug)]
pub struct RequestScheduler {
    config: Config,
    service: ServiceModel,
    jobs: BTreeMap<u64, Job>,
    /// The one queue ([`Placement::WhenFree`]).
    queue: Lanes,
    /// The tenants' service so far.
    counters: Counters,
    engines: Vec<Engine>,
    decisions: VecDeque<Decision>,
    arrivals: u64,
    turn: usize,
    scratch: Vec<(f64, f64, f64)>,
    /// The time of the last input.
    clock: f64,
    /// Until when requests above the standard class are about ([`HIGH_CLASS_WINDOW`] after the
    /// last one arrived).
    high_class_until: f64,
    /// Admissions so far (each job's `admitted_seq`).
    admissions: u64,
    /// Waiting requests above the standard class that evict sheddable ones at a time (their
    /// TTFT deadline's guard), earliest first (`displace.rs`).
    displace_at: Vec<(f64, u64)>,
    /// The reference request's rank for an engine that orders, and the rates it was ranked
    /// with (`engine_order.rs`).
    reference_rank: Option<(Option<(f64, f64)>, f64)>,
}

impl RequestScheduler {
    /// A scheduler for `config`.
    pub fn new(config: Config) -> Result<RequestScheduler, ConfigError> {
        if config.engines.is_empty() {
            return Err(ConfigError::NoEngine);
        }
        if config.engines.iter().any(|e| e.concurrency == 0) {
            return Err(ConfigError::Zero("an engine's concurrency"));
        }
        if let Some(o) = config.engine_order {
            if o.holds == 0 {
                return Err(ConfigError::Zero("what an engine that orders holds"));
            }
            if !(o.horizon_s.is_finite() && o.horizon_s > 0.0) {
                return Err(ConfigError::Horizon(o.horizon_s));
            }
        }
        if config.max_waiting == 0 {
            return Err(ConfigError::Zero("the queue bound"));
        }
        if matches!(config.policy.source, crate::PredictionSource::Noisy(_)) && !config.knows_truth
        {
            return Err(ConfigError::NeedsTruth(config.policy.to_string()));
        }
        if config.policy.preemptive && !config.can_pause {
            return Err(ConfigError::CannotPause {
                policy: config.policy.to_string(),
                instead: RequestPolicySpec {
                    preemptive: false,
                    ..config.policy
                }
                .to_string(),
            });
        }
        let engines = config
            .engines
            .iter()
            .map(|&limits| Engine {
                limits: EngineLimits {
                    block_tokens: limits.block_tokens.max(1),
                    ..limits
                },
                admitted: Vec::new(),
                report: EngineReport::default(),
                cost: 0.0,
                headroom: Headroom::default(),
                pressed: false,
                queue: Lanes::default(),
                up: true,
                prefixes: PrefixCache::default(),
                learner: config
                    .learn_concurrency
                    .then(|| Learner::new(limits.concurrency)),
                responsive: true,
                orders: config.engine_order.is_some(),
                watch: Watched::default(),
            })
            .collect();
        Ok(RequestScheduler {
            service: config.service,
            counters: Counters::new(&config.fairness.weights),
            config,
            jobs: BTreeMap::new(),
            queue: Lanes::default(),
            engines,
            decisions: VecDeque::new(),
            arrivals: 0,
            turn: 0,
            scratch: Vec::new(),
            clock: 0.0,
            high_class_until: f64::NEG_INFINITY,
            admissions: 0,
            displace_at: Vec::new(),
            reference_rank: None,
        })
    }

    /// The policy.
    pub fn policy(&self) -> RequestPolicySpec {
        self.config.policy
    }

    /// Requests waiting in its queues.
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.engines.iter().map(|e| e.queue.len()).sum::<usize>()
    }

    /// Whether an arrival of `class` would find a sheddable request of a lower class waiting
    /// to displace from a full queue (the one queue; placed on arrival, any engine's).
    pub fn can_displace(&self, class: i32) -> bool {
        std::iter::once(&self.queue)
            .chain(self.engines.iter().map(|e| &e.queue))
            .any(|l| l.displaceable(class).is_some())
    }

    /// Requests admitted to `engine` and not done.
    pub fn outstanding(&self, engine: usize) -> usize {
        self.engines.get(engine).map_or(0, |e| e.admitted.len())
    }

    /// When request `id`'s TTFT deadline puts it first, in the time the scheduler is fed
    /// (`None`: it has none, one it cannot meet, or is not held).
    pub fn deadline(&self, id: u64) -> Option<f64> {
        self.jobs.get(&id)?.deadline_at
    }

    /// The number request `id` is sent to its engine with, where that engine orders its own
    /// queue by it (lower first; `engine_order.rs`); `None` where it does not, or `id` is not
    /// admitted.
    pub fn engine_priority(&self, id: u64) -> Option<i64> {
        let j = self.jobs.get(&id)?;
        let e = self.engines.get(j.engine?)?;
        (j.place != Place::Waiting && e.orders).then(|| engine_priority(j.priority, j.engine_key))
    }

    /// Whether `engine` is sent numbers for its own queue (`engine_order.rs`).
    pub fn engine_orders(&self, engine: usize) -> bool {
        self.engines.get(engine).is_some_and(|e| e.orders)
    }

    /// The learned KV headroom of `engine`.
    pub fn headroom(&self, engine: usize) -> f64 {
        self.engines.get(engine).map_or(1.0, |e| e.headroom.get())
    }

    /// The service model as learned so far.
    pub fn service(&self) -> &ServiceModel {
        &self.service
    }

    /// The next decision, oldest first.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// Feed what happened at `now` (seconds on the driver's clock).
    pub fn handle(&mut self, now: f64, input: Input) -> Result<(), InputError> {
        self.clock = self.clock.max(now);
        self.readmit_due(now);
        match input {
            Input::Arrived(a) => return self.arrive(now, a),
            Input::Scraped { engine, scrape } => self.scraped(now, engine, scrape)?,
            Input::Failed { engine } => self.failed(now, engine)?,
            Input::Replied { engine } => self.engine_mut(engine)?.watch.replied(),
            Input::Progress { id, generated } => self.progress(now, id, generated),
            Input::Done { id } => {
                let engine = self.jobs.get(&id).and_then(|j| j.engine);
                self.forget(id);
                self.decide(now, engine);
            }
            Input::Prompt { id, tokens } => self.prompt(id, tokens),
            Input::Preempted { id } => self.preempted(id),
            Input::Engine { engine, report } => self.engine_report(now, engine, report)?,
            Input::Answered {
                engine,
                output_tokens,
                service_s,
            } => self.answered(now, engine, output_tokens, service_s)?,
            Input::Generated { engine, tokens } => self.generated(now, engine, tokens)?,
            Input::Answering { id } => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.answering = true;
                }
            }
            Input::Responsive { engine, responsive } => {
                self.responsive(now, engine, responsive)?;
            }
            Input::Served(s) => self.service.learn(&s),
            Input::EngineOrders { engine, orders } => {
                let can = self.config.engine_order.is_some();
                self.engine_mut(engine)?.orders = orders && can;
                self.decide(now, Some(engine));
            }
            Input::Availability { engine, up } => {
                let e = self.engine_mut(engine)?;
                e.up = up;
                if up {
                    self.decide(now, Some(engine));
                }
            }
        }
        Ok(())
    }

    /// Request `id` has generated `generated` tokens: its tenant's service, and (its first
    /// token, above or below the standard class) what it held back may go.
    fn progress(&mut self, now: f64, id: u64, generated: u32) {
        let mut first_token_of = None;
        if let Some(j) = self.jobs.get_mut(&id) {
            let more = generated.saturating_sub(j.generated);
            self.counters
                .charge(j.tenant, OUTPUT_TOKEN_WEIGHT * f64::from(more));
            if j.generated == 0 && generated > 0 && j.priority != 0 {
                first_token_of = j.engine;
            }
            j.generated = j.generated.max(generated);
            if j.place == Place::Preempted {
                j.place = Place::Admitted;
            }
        }
        if let Some(e) = first_token_of
            && self.config.fairness.sheddable_after_first_token
        {
            // Sheddable requests held back for its prefill may go now.
            self.decide(now, Some(e));
        }
    }

    /// The engine counted request `id`'s prompt as `tokens`.
    fn prompt(&mut self, id: u64, tokens: u32) {
        if let Some(j) = self.jobs.get_mut(&id) {
            if j.place != Place::Waiting || j.generated > 0 {
                // Charged at admission (only then): the difference now.
                self.counters
                    .correct(j.tenant, f64::from(tokens) - f64::from(j.input));
            }
            j.input = tokens;
        }
    }

    /// The engine preempted request `id` (its KV dropped): its engine's headroom learns.
    fn preempted(&mut self, id: u64) {
        if let Some(j) = self.jobs.get_mut(&id)
            && j.place == Place::Admitted
        {
            j.place = Place::Preempted;
            if let Some(e) = j.engine {
                self.engines[e].headroom.preempted();
            }
        }
    }

    fn arrive(&mut self, now: f64, a: Arrival) -> Result<(), InputError> {
        if self.jobs.contains_key(&a.id) {
            return Err(InputError::Duplicate(a.id));
        }
        if self.at_tenant_limit(a.tenant) {
            let reason = ShedReason::TenantLimit;
            self.decisions
                .push_back(Decision::Shed { id: a.id, reason });
            return Ok(());
        }
        if a.priority > 0 {
            self.high_class_until = now + HIGH_CLASS_WINDOW;
        }
        let (id, priority) = (a.id, a.priority);
        let mut job = arrival::job_of(a, now, self.arrivals, self.config.policy, &self.service);
        self.arrivals += 1;
        self.number_for_engine(now, &mut job);
        self.route_on_arrival(&mut job);
        let engine = job.engine;
        self.jobs.insert(id, job);
        self.enqueue(id);
        self.decide(now, engine);
        if self
            .jobs
            .get(&id)
            .is_some_and(|j| j.place == Place::Waiting)
        {
            self.shed_on_arrival(id, priority, engine);
            self.displace_on_arrival(id);
        }
        Ok(())
    }

    /// With an engine that orders its own queue, `job`'s number there: its virtual deadline
    /// (`engine_order.rs`).
    fn number_for_engine(&mut self, now: f64, job: &mut Job) {
        let Some(o) = self.config.engine_order else {
            return;
        };
        let spec = self.config.policy;
        let rank = |j: &Job| order::rank(spec.order, j, &self.service, spec.preemptive).major;
        // The reference's rank changes only with the rates a time order ranks by.
        let reference = match self.reference_rank {
            Some((rates, r)) if rates == job.rates => r,
            _ => rank(&job.reference(spec.order)),
        };
        self.reference_rank = Some((job.rates, reference));
        let place = engine_order::place(rank(job), reference);
        let lead = self.counters.lead(job.tenant);
        job.engine_key = engine_order::virtual_deadline(&o, now, place, lead, job.deadline_at);
    }

    /// Request `id` of class `priority` arrived and waits (in `engine`'s queue, placed on
    /// arrival): shed it, or the sheddable request it displaces, if the rules say so.
    fn shed_on_arrival(&mut self, id: u64, priority: i32, engine: Option<usize>) {
        // Held only while another's prompt is prefilled, with a slot free: not saturated.
        // With no engine answering, nothing is held for one that may never answer.
        let sheddable_saturated = priority < 0
            && self.lanes_of(engine).sheddable() > self.config.fairness.sheddable_waiting
            && !self.slot_free(engine);
        let shed = if self.none_responsive() {
            Some((id, ShedReason::NoEngine))
        } else if sheddable_saturated {
            Some((id, ShedReason::Saturated))
        } else if self.waiting() > self.config.max_waiting {
            // A higher class displaces the newest sheddable request of the lowest class.
            Some(match self.lanes_of(engine).displaceable(priority) {
                Some(other) => (other, ShedReason::Displaced),
                None => (id, ShedReason::QueueFull),
            })
        } else {
            None
        };
        if let Some((shed, reason)) = shed {
            self.forget(shed);
            self.decisions
                .push_back(Decision::Shed { id: shed, reason });
        }
    }

    /// Placed on arrival: route `job` now, among the engines that serve (all of them if none
    /// does); its predicted cost counts there from now.
    fn route_on_arrival(&mut self, job: &mut Job) {
        if self.config.placement != Placement::AtArrival {
            return;
        }
        let allowed = job.allowed((0..self.engines.len()).collect());
        let serving: Vec<usize> = (allowed.iter().copied())
            .filter(|&e| self.engines[e].serves())
            .collect();
        let all: Vec<usize> = if serving.is_empty() { allowed } else { serving };
        let loads = self.loads(&job.prefix);
        job.engine = self.config.router.pick(&all, &loads, &mut self.turn);
        if let Some(e) = job.engine {
            self.engines[e].cost += job.routed_cost;
        }
    }

    /// Engine `engine`, or the error an input naming a wrong one gets.
    fn engine_mut(&mut self, engine: usize) -> Result<&mut Engine, InputError> {
        self.engines
            .get_mut(engine)
            .ok_or(InputError::NoEngine(engine))
    }
}

/// The earlier of two guard times, either absent.
fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
