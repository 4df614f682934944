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
//!
//! The scheduler is a small state machine over parts with one job each: [`Input`]s are applied
//! here, to the part they concern, and a decision round follows where who may run can have
//! changed. The parts: `arrival.rs` (a request made into a job, its engine number, the shedding
//! rules), `waiting.rs` (the queues and tenants' service: the order of who waits), `fit.rs` (KV
//! admission: whether a request fits an engine), `round.rs` (the round: admission and
//! preemption), `displace.rs` (eviction for a higher class and its timers), `reclaim.rs` (an
//! engine that stops answering), `engines.rs` (each engine's account, its learner and what is
//! seen of it from outside), and `book.rs` (every request and where it is).

mod arrival;
mod book;
mod config;
mod displace;
mod engine_order;
mod engines;
mod fit;
mod io;
mod reclaim;
mod round;
mod waiting;

pub use config::{Config, EngineLimits, Eviction, Fairness, HIGH_CLASS_WINDOW, Placement};
pub use engine_order::{CLASS_LIMIT, CLASS_SPAN_MS, EngineOrder, engine_priority};
pub use io::{Arrival, Decision, EngineReport, EvictReason, Input, ShedReason};

use crate::error::SchedulerError;
use crate::job::Place;
use crate::learn::{Answer, Count, Learner};
use crate::policy::RequestPolicySpec;
use crate::service::ServiceModel;
use crate::watch::{Scrape, Watched};
pub use arrival::AGING_FACTOR;
use arrival::{ReferenceRank, earliest};
use book::Book;
use engines::EngineView;
use round::Round;
use std::collections::VecDeque;

/// The LLM request scheduler.
#[derive(Debug)]
pub struct RequestScheduler {
    config: Config,
    service: ServiceModel,
    /// Every request and every engine's account.
    book: Book,
    decisions: VecDeque<Decision>,
    arrivals: u64,
    /// The time of the last input.
    clock: f64,
    /// Until when requests above the standard class are about ([`HIGH_CLASS_WINDOW`] after the
    /// last one arrived).
    high_class_until: f64,
    /// The reference request's rank for an engine that orders (`engine_order.rs`).
    reference_rank: ReferenceRank,
}

impl RequestScheduler {
    /// A scheduler for `config`.
    pub fn new(config: Config) -> Result<RequestScheduler, SchedulerError> {
        config.check()?;
        Ok(RequestScheduler {
            service: config.service,
            book: Book::new(&config),
            config,
            decisions: VecDeque::new(),
            arrivals: 0,
            clock: 0.0,
            high_class_until: f64::NEG_INFINITY,
            reference_rank: None,
        })
    }

    /// The policy.
    pub fn policy(&self) -> RequestPolicySpec {
        self.config.policy
    }

    /// Requests waiting in its queues.
    pub fn waiting(&self) -> usize {
        self.book.waiting.len()
    }

    /// Whether an arrival of `class` would find a sheddable request of a lower class waiting
    /// to displace from a full queue (the one queue; placed on arrival, any engine's).
    pub fn can_displace(&self, class: i32) -> bool {
        self.book.waiting.can_displace(class)
    }

    /// Requests admitted to `engine` and not done.
    pub fn outstanding(&self, engine: usize) -> usize {
        self.book
            .engines
            .get(engine)
            .map_or(0, |e| e.admitted.len())
    }

    /// When request `id`'s TTFT deadline puts it first, in the time the scheduler is fed
    /// (`None`: it has none, one it cannot meet, or is not held).
    pub fn deadline(&self, id: u64) -> Option<f64> {
        self.book.jobs.get(&id)?.deadline_at
    }

    /// The number request `id` is sent to its engine with, where that engine orders its own
    /// queue by it (lower first; `engine_order.rs`); `None` where it does not, or `id` is not
    /// admitted.
    pub fn engine_priority(&self, id: u64) -> Option<i64> {
        let j = self.book.jobs.get(&id)?;
        let e = self.book.engines.get(j.engine?)?;
        (j.place != Place::Waiting && e.orders).then(|| engine_priority(j.priority, j.engine_key))
    }

    /// Whether `engine` is sent numbers for its own queue (`engine_order.rs`).
    pub fn engine_orders(&self, engine: usize) -> bool {
        self.book.engines.get(engine).is_some_and(|e| e.orders)
    }

    /// The learned KV headroom of `engine`.
    pub fn headroom(&self, engine: usize) -> f64 {
        self.book
            .engines
            .get(engine)
            .map_or(1.0, |e| e.headroom.get())
    }

    /// The concurrency learned for `engine` (`None`: not learned, or no such engine).
    pub fn learned(&self, engine: usize) -> Option<usize> {
        self.book.engines.get(engine)?.learned()
    }

    /// What is seen of `engine` from outside (`None`: no such engine).
    pub fn watched(&self, engine: usize) -> Option<&Watched> {
        Some(&self.book.engines.get(engine)?.watch)
    }

    /// Whether no engine answers ([`Input::Responsive`]): every arrival is shed then.
    pub fn none_responsive(&self) -> bool {
        reclaim::none_responsive(&self.book.engines)
    }

    /// Why an arrival of `class` from `tenant` would be refused now, before anything else is
    /// known of it (a driver refuses a flood so before it predicts anything); `None`: it would
    /// not be, for these reasons (its arrival decides the rest).
    pub fn refusal(&self, class: i32, tenant: usize) -> Option<ShedReason> {
        if (self.book).at_tenant_limit(tenant, &self.config.fairness.tenant_limits) {
            Some(ShedReason::TenantLimit)
        } else if self.none_responsive() {
            Some(ShedReason::NoEngine)
        } else if self.waiting() >= self.config.max_waiting && !self.can_displace(class) {
            Some(ShedReason::QueueFull)
        } else {
            None
        }
    }

    /// The service model as learned so far.
    pub fn service(&self) -> &ServiceModel {
        &self.service
    }

    /// The next decision, oldest first.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// When the scheduler next needs [`handle_timeout`](RequestScheduler::handle_timeout), on the
    /// clock it is fed (`None`: no timer is armed): a deadline's eviction, or an ejection's end.
    pub fn poll_timeout(&self) -> Option<f64> {
        let readmission = engines::next_readmission(&self.book.engines);
        earliest(self.book.displacer.next(), readmission)
    }

    /// The clock reached `now`: engines whose ejection is over are put back, and requests whose
    /// deadline's guard has come and that still wait evict sheddable requests for themselves
    /// (`displace.rs`). Decisions follow as after [`handle`](RequestScheduler::handle).
    pub fn handle_timeout(&mut self, now: f64) {
        self.clock = self.clock.max(now);
        self.readmit_due(now);
        for id in self.book.displacer.due(now) {
            if (self.book.jobs.get(&id)).is_some_and(|j| j.place == Place::Waiting) {
                self.round().displace();
            }
        }
    }

    /// Feed what happened at `now` (seconds on the driver's clock).
    pub fn handle(&mut self, now: f64, input: Input) -> Result<(), SchedulerError> {
        self.clock = self.clock.max(now);
        self.readmit_due(now);
        match input {
            Input::Arrived(a) => return self.arrive(now, a),
            Input::Scraped { engine, scrape } => self.scraped(now, engine, scrape)?,
            Input::Failed { engine } => self.failed(now, engine)?,
            Input::Replied { engine } => self.engine_mut(engine)?.watch.replied(),
            Input::Progress { id, generated } => self.progress(now, id, generated),
            Input::Done { id } => {
                let engine = self.book.jobs.get(&id).and_then(|j| j.engine);
                self.book.forget(id, self.config.placement);
                self.decide(now, engine);
            }
            Input::Prompt { id, tokens } => self.book.prompt(id, tokens),
            Input::Preempted { id } => self.book.preempted(id),
            Input::Engine { engine, report } => self.engine_report(now, engine, report)?,
            Input::Answered {
                engine,
                output_tokens,
                service_s,
            } => {
                let backlog = self.waiting() > 0;
                let answer = Answer {
                    at: now,
                    output_tokens,
                    service_s,
                    backlog,
                };
                self.learn(now, engine, |l| l.answered(answer))?;
            }
            Input::Generated { engine, tokens } => self.generated(now, engine, tokens)?,
            Input::Answering { id } => {
                if let Some(j) = self.book.jobs.get_mut(&id) {
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
                self.engine_mut(engine)?.up = up;
                if up {
                    self.decide(now, Some(engine));
                }
            }
        }
        Ok(())
    }

    /// A round over the book, writing to the decisions.
    fn round(&mut self) -> Round<'_> {
        Round {
            config: &self.config,
            service: &self.service,
            book: &mut self.book,
            out: &mut self.decisions,
            high_class_about: self.clock <= self.high_class_until,
        }
    }

    /// Run a decision round about `engine` (`None`: the queue; `round.rs`).
    fn decide(&mut self, now: f64, engine: Option<usize>) {
        self.round().decide(now, engine);
    }

    fn arrive(&mut self, now: f64, a: Arrival) -> Result<(), SchedulerError> {
        if self.book.jobs.contains_key(&a.id) {
            return Err(SchedulerError::Duplicate(a.id));
        }
        if (self.book).at_tenant_limit(a.tenant, &self.config.fairness.tenant_limits) {
            let reason = ShedReason::TenantLimit;
            self.decisions
                .push_back(Decision::Shed { id: a.id, reason });
            return Ok(());
        }
        if a.priority > 0 {
            self.high_class_until = now + HIGH_CLASS_WINDOW;
        }
        let (id, priority) = (a.id, a.priority);
        let spec = self.config.policy;
        let mut job = arrival::job_of(a, now, self.arrivals, spec, &self.service);
        self.arrivals += 1;
        if let Some(o) = self.config.engine_order {
            let lead = self.book.waiting.counters.lead(job.tenant);
            let reference = &mut self.reference_rank;
            job.engine_key =
                arrival::engine_key(&o, now, &job, lead, reference, spec, &self.service);
        }
        self.book.route(&mut job, &self.config);
        let engine = job.engine;
        self.book.jobs.insert(id, job);
        self.book.enqueue(id, true, &self.config, &self.service);
        self.decide(now, engine);
        if (self.book.jobs.get(&id)).is_some_and(|j| j.place == Place::Waiting) {
            if let Some((shed, reason)) =
                arrival::to_shed(&self.book, &self.config, id, priority, engine)
            {
                self.shed(shed, reason);
            }
            self.displace_on_arrival(id);
        }
        Ok(())
    }

    /// After `id` arrived: if it waits, is above the standard class and eviction is on, evict
    /// for it now, or (with a deadline it can meet) arm its timer (`displace.rs`).
    fn displace_on_arrival(&mut self, id: u64) {
        let Some(j) = self.book.jobs.get(&id) else {
            return;
        };
        if j.priority <= 0
            || j.place != Place::Waiting
            || self.config.fairness.eviction.victims() == 0
        {
            return;
        }
        match j.deadline_at {
            None => self.round().displace(),
            Some(at) => self.book.displacer.arm(at, id),
        }
    }

    /// Forget request `id` and tell the driver it is shed, for `reason`.
    fn shed(&mut self, id: u64, reason: ShedReason) {
        self.book.forget(id, self.config.placement);
        self.decisions.push_back(Decision::Shed { id, reason });
    }

    /// Request `id` has generated `generated` tokens; at its first token (above or below the
    /// standard class) what it held back may go.
    fn progress(&mut self, now: f64, id: u64, generated: u32) {
        if let Some(e) = self.book.progress(id, generated)
            && self.config.fairness.sheddable_after_first_token
        {
            // Sheddable requests held back for its prefill may go now.
            self.decide(now, Some(e));
        }
    }

    /// `engine` answers again, or stopped answering (`reclaim.rs`): its requests whose answer
    /// has not begun are taken back and placed again, or, with no engine answering, everything
    /// waiting is shed.
    fn responsive(
        &mut self,
        now: f64,
        engine: usize,
        responsive: bool,
    ) -> Result<(), SchedulerError> {
        self.engine_mut(engine)?.responsive = responsive;
        if responsive {
            self.decide(now, Some(engine));
            return Ok(());
        }
        for id in reclaim::to_take_back(&self.book.engines[engine], &self.book.jobs) {
            if (self.book).take_back(id, engine, &self.config, &self.service) {
                let reason = EvictReason::Unresponsive;
                (self.decisions).push_back(Decision::Evict { id, engine, reason });
            }
        }
        if self.none_responsive() {
            for id in reclaim::waiting(&self.book.jobs) {
                self.shed(id, ShedReason::NoEngine);
            }
        } else {
            self.decide(now, None);
        }
        Ok(())
    }

    /// A scrape of `engine` at `now` (`crate::watch`): its report, whether it answers, its
    /// token counter.
    fn scraped(&mut self, now: f64, engine: usize, scrape: Scrape) -> Result<(), SchedulerError> {
        let e = self.engine_mut(engine)?;
        let kv_tokens = e.limits.kv_tokens;
        let seen = e.watch.scraped(now, scrape, kv_tokens);
        if let Some(report) = seen.report {
            self.engine_report(now, engine, report)?;
        }
        if let Some(responsive) = seen.responsive {
            self.responsive(now, engine, responsive)?;
        }
        if let Some(tokens) = seen.generated {
            self.generated(now, engine, tokens)?;
        }
        Ok(())
    }

    /// A request to `engine` failed at the transport level at `now`: it is ejected unless it
    /// is out already or the last engine in service.
    fn failed(&mut self, now: f64, engine: usize) -> Result<(), SchedulerError> {
        self.engine_mut(engine)?;
        let others = (self.book.engines.iter().enumerate())
            .filter(|&(i, e)| i != engine && e.serves())
            .count();
        self.book.engines[engine].watch.failed(now, others);
        Ok(())
    }

    /// Put back every engine whose ejection is over at `now`, and admit there.
    fn readmit_due(&mut self, now: f64) {
        if engines::next_readmission(&self.book.engines).is_none_or(|t| t > now) {
            return;
        }
        for e in 0..self.book.engines.len() {
            if self.book.engines[e].watch.readmit(now) {
                self.decide(now, Some(e));
            }
        }
    }

    /// `engine` reported `report`: its slots bound its learner.
    fn engine_report(
        &mut self,
        now: f64,
        engine: usize,
        report: EngineReport,
    ) -> Result<(), SchedulerError> {
        let bounded = self.engine_mut(engine)?.reported(report);
        self.limit(engine, bounded);
        self.decide(now, Some(engine));
        Ok(())
    }

    /// `engine`'s token counter read `tokens`.
    fn generated(&mut self, now: f64, engine: usize, tokens: f64) -> Result<(), SchedulerError> {
        let backlog = self.waiting() > 0;
        let count = Count {
            at: now,
            tokens,
            backlog,
        };
        self.learn(now, engine, |l| l.counted(count))
    }

    /// Feed `engine`'s learner, if it has one, and admit within a new limit at once.
    fn learn(
        &mut self,
        now: f64,
        engine: usize,
        feed: impl FnOnce(&mut Learner) -> Option<usize>,
    ) -> Result<(), SchedulerError> {
        let learned = self.engine_mut(engine)?.learn(feed);
        if self.limit(engine, learned) {
            self.decide(now, Some(engine));
        }
        Ok(())
    }

    /// A learner's new limit for `engine`, if any, told to the driver; whether there was one.
    fn limit(&mut self, engine: usize, learned: Option<usize>) -> bool {
        let Some(concurrency) = learned else {
            return false;
        };
        (self.decisions).push_back(Decision::Limit {
            engine,
            concurrency,
        });
        true
    }

    /// Engine `engine`, or the error an input naming a wrong one gets.
    fn engine_mut(&mut self, engine: usize) -> Result<&mut EngineView, SchedulerError> {
        (self.book.engines)
            .get_mut(engine)
            .ok_or(SchedulerError::UnknownEngine(engine))
    }
}
