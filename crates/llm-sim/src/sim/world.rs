//! The simulation's state and its event loop: the engines, the scheduler between them and what
//! it decided, stepped in virtual time (the earliest engine first, arrivals and timers as
//! events), with every decision carried out at once.

use super::contract::{Rules, Runs, SimError, SimRun};
use super::oracle::Oracle;
use crate::Request;
use crate::engine::{Engine, EngineConfig, RunStats, StepEvents};
use std::time::Instant;
use xsched_llm_core::service::ServiceModel;
use xsched_llm_core::{
    Arrival, Config, Decision, EvictReason, Input, PredictionSource, RequestPolicySpec,
    RequestScheduler, ShedReason,
};

/// The simulation: engines, the scheduler, what is predicted, what was measured.
struct World<'a> {
    cfg: &'a EngineConfig,
    requests: &'a [Request],
    rules: &'a Rules,
    /// Whether arrivals are predicted.
    predicts: bool,
    predict_ns: Vec<u64>,
    /// Requests refused at arrival (larger than an engine's whole KV pool).
    refused: u64,
    engines: Vec<Engine<'a>>,
    scheduler: RequestScheduler,
    oracle: Oracle,
    admitted: Vec<usize>,
    seen: Vec<bool>,
    scheduler_ns: Vec<u64>,
    shed: u64,
    events: StepEvents,
    /// When each request was last admitted (its service, for a concurrency learner).
    admitted_at: Vec<f64>,
    /// Tokens each engine generated so far (its counter, for a concurrency learner).
    generated: Vec<f64>,
    evicted: Vec<usize>,
    reclaimed: Vec<usize>,
    limits: Vec<(f64, usize, usize)>,
    /// Whether the hanging engine was noticed.
    noticed: bool,
    decided: Vec<(usize, Result<usize, ShedReason>)>,
    /// The next of the rules' `outside` inputs to feed.
    next_outside: usize,
}

impl World<'_> {
    /// Feed `input` at `now`, charging its wall time to request `charge`, and carry out what
    /// the scheduler decides.
    fn handle(&mut self, now: f64, input: Input, charge: Option<usize>) {
        let t = Instant::now();
        // Ids are positions the driver made: an arrival is new, an engine index exists.
        let handled = self.scheduler.handle(now, input);
        debug_assert!(handled.is_ok(), "{handled:?}");
        let mut decisions = Vec::new();
        while let Some(d) = self.scheduler.poll_decision() {
            decisions.push(d);
        }
        if let Some(i) = charge {
            self.scheduler_ns[i] += t.elapsed().as_nanos() as u64;
        }
        self.carry_out(now, decisions);
    }

    /// Carry out the scheduler's `decisions` at `now`.
    fn carry_out(&mut self, now: f64, decisions: Vec<Decision>) {
        let mut displaced = Vec::new();
        for d in decisions {
            match d {
                Decision::Admit { id, engine } => {
                    let (i, e) = (id as usize, &mut self.engines[engine]);
                    if !e.busy() {
                        e.wait_until(now);
                    }
                    e.accept(i, self.scheduler.engine_priority(id));
                    self.admitted_at[i] = now;
                    if !self.seen[i] {
                        self.seen[i] = true;
                        self.admitted.push(i);
                        self.decided.push((i, Ok(engine)));
                    }
                }
                Decision::Evict { id, engine, reason } => {
                    let (i, e) = (id as usize, &mut self.engines[engine]);
                    match reason {
                        EvictReason::Paused => e.pause(i),
                        EvictReason::Unresponsive => {
                            e.abort(i);
                            self.reclaimed.push(i);
                        }
                        EvictReason::Displaced => {
                            e.abort(i);
                            self.evicted.push(i);
                            displaced.push((id, engine));
                        }
                    }
                }
                Decision::Shed { id, reason } => {
                    self.shed += 1;
                    let i = id as usize;
                    if !self.seen[i] {
                        self.seen[i] = true;
                        self.decided.push((i, Err(reason)));
                    }
                }
                Decision::Limit {
                    engine,
                    concurrency,
                } => self.limits.push((now, engine, concurrency)),
            }
        }
        // An evicted request's client is told at once: it leaves, freeing its slot, and its
        // engine's room is reported anew (it may have nothing left to step).
        for &(id, _) in &displaced {
            self.handle(now, Input::Done { id }, None);
        }
        if let Some(&(_, engine)) = displaced.last() {
            let report = self.engines[engine].report();
            self.handle(now, Input::Engine { engine, report }, None);
        }
    }

    /// Whether engine `e` has hung (it steps no more).
    fn hung(&self, e: usize) -> bool {
        self.rules
            .hang
            .is_some_and(|h| h.engine == e && self.engines[e].now() >= h.at)
    }

    /// When the hung engine is noticed (infinite: never, or already).
    fn hang_noticed_at(&self) -> f64 {
        match self.rules.hang {
            Some(h) if !self.noticed => h.at + h.noticed_after,
            _ => f64::INFINITY,
        }
    }

    /// When the hung engine is noticed or the next input from outside comes (infinite: never).
    fn notice_at(&self) -> f64 {
        let outside = self.rules.outside.get(self.next_outside);
        (self.hang_noticed_at()).min(outside.map_or(f64::INFINITY, |(at, _)| *at))
    }

    /// A timer came due at `now` (the scheduler's, or noticing a hung engine): idle engines
    /// wait until then, and the scheduler's decisions are carried out.
    fn timeout(&mut self, now: f64) {
        for e in self.engines.iter_mut().filter(|e| !e.busy()) {
            e.wait_until(now);
        }
        if let Some(h) = self.rules.hang
            && now >= self.hang_noticed_at()
        {
            self.noticed = true;
            let silent = Input::Responsive {
                engine: h.engine,
                responsive: false,
            };
            self.handle(now, silent, None);
        }
        while let Some((at, input)) = self.rules.outside.get(self.next_outside)
            && *at <= now
        {
            self.next_outside += 1;
            self.handle(now, input.clone(), None);
        }
        self.scheduler.handle_timeout(now);
        let mut decisions = Vec::new();
        while let Some(d) = self.scheduler.poll_decision() {
            decisions.push(d);
        }
        self.carry_out(now, decisions);
    }

    /// Step engine `e` and tell the scheduler what happened; whether it could run.
    fn step(&mut self, e: usize) -> bool {
        let mut events = std::mem::take(&mut self.events);
        if !self.engines[e].step(&mut events) {
            self.events = events;
            return false;
        }
        let now = self.engines[e].now();
        for &(i, generated) in &events.progressed {
            let progress = Input::Progress {
                id: i as u64,
                generated,
            };
            let _ = self.scheduler.handle(now, progress);
        }
        for &i in &events.preempted {
            let _ = self
                .scheduler
                .handle(now, Input::Preempted { id: i as u64 });
        }
        for &i in &events.finished {
            self.oracle.learn(&self.requests[i]);
            if self.rules.learn_concurrency {
                let answered = Input::Answered {
                    engine: e,
                    output_tokens: self.requests[i].output_tokens,
                    service_s: now - self.admitted_at[i],
                };
                self.handle(now, answered, None);
            }
            self.handle(now, Input::Done { id: i as u64 }, Some(i));
        }
        if self.rules.learn_concurrency {
            self.generated[e] += events.progressed.len() as f64;
            let tokens = self.generated[e];
            self.handle(now, Input::Generated { engine: e, tokens }, None);
        }
        self.events = events;
        let report = self.engines[e].report();
        self.handle(now, Input::Engine { engine: e, report }, None);
        true
    }
}

pub(super) fn run(
    runs: &Runs<'_>,
    policy: RequestPolicySpec,
    rules: &Rules,
    requests: &[Request],
) -> Result<SimRun, SimError> {
    let mut world = World::new(runs, policy, rules, requests)?;
    let instances = world.engines.len();
    for e in 0..instances {
        let report = world.engines[e].report();
        world.handle(0.0, Input::Engine { engine: e, report }, None);
    }
    let mut next = 0usize;
    loop {
        let arrival = requests.get(next).map_or(f64::INFINITY, |r| r.arrival);
        // The scheduler's timer (a deadline's eviction) and noticing a hung engine are events
        // like an arrival.
        let timer = world.scheduler.poll_timeout().unwrap_or(f64::INFINITY);
        let timer = timer.min(world.notice_at());
        let event = arrival.min(timer);
        let earliest = (0..instances)
            .filter(|&e| world.engines[e].busy() && !world.hung(e))
            .min_by(|&a, &b| world.engines[a].now().total_cmp(&world.engines[b].now()));
        match earliest {
            Some(e) if world.engines[e].now() <= event => {
                if !world.step(e) {
                    if event.is_infinite() {
                        // Nothing it holds can ever run.
                        break;
                    }
                    world.engines[e].wait_until(event);
                }
            }
            _ if timer < arrival => world.timeout(timer),
            _ if next < requests.len() => {
                world.arrive(next);
                next += 1;
            }
            _ => break,
        }
    }
    Ok(world.finish())
}

impl<'a> World<'a> {
    /// The engines of `runs`, the scheduler for `policy` and `rules`, and the predictor.
    fn new(
        runs: &Runs<'a>,
        policy: RequestPolicySpec,
        rules: &'a Rules,
        requests: &'a [Request],
    ) -> Result<World<'a>, SimError> {
        let Runs {
            cfg,
            cluster,
            history,
            warm,
        } = *runs;
        let instances = cluster.instances.max(1);
        let scheduler = RequestScheduler::new(Config {
            policy,
            engines: vec![cfg.limits(); instances],
            router: cluster.router,
            placement: cluster.placement,
            max_waiting: rules.max_waiting.unwrap_or(usize::MAX),
            service: ServiceModel::Fit(cfg.fit()),
            can_pause: true,
            knows_truth: true,
            fairness: rules.fairness.clone(),
            learn_concurrency: rules.learn_concurrency,
            engine_order: rules.engine_order,
        })?;
        let predicts = policy.predicts() || cluster.router.predicts();
        let uses_history = matches!(
            policy.source,
            PredictionSource::History | PredictionSource::Model
        ) || (matches!(policy.source, PredictionSource::None) && predicts);
        let mut oracle = Oracle {
            source: policy.source,
            history: (uses_history && history > 0)
                .then(|| xsched_llm_predict::learner(policy.source, history)),
        };
        for r in warm {
            oracle.learn(r);
        }
        Ok(World {
            cfg,
            requests,
            rules,
            predicts,
            engines: (0..instances).map(|_| Engine::new(cfg, requests)).collect(),
            scheduler,
            oracle,
            admitted: Vec::with_capacity(requests.len()),
            seen: vec![false; requests.len()],
            scheduler_ns: vec![0; requests.len()],
            predict_ns: Vec::with_capacity(requests.len()),
            refused: 0,
            shed: 0,
            events: StepEvents::default(),
            admitted_at: vec![0.0; requests.len()],
            generated: vec![0.0; instances],
            evicted: Vec::new(),
            reclaimed: Vec::new(),
            limits: Vec::new(),
            noticed: false,
            decided: Vec::new(),
            next_outside: 0,
        })
    }

    /// Request `next` arrives: predicted, and told to the scheduler (refused if it can never
    /// fit an engine's KV pool).
    fn arrive(&mut self, next: usize) {
        let r = &self.requests[next];
        for e in self.engines.iter_mut().filter(|e| !e.busy()) {
            e.wait_until(r.arrival);
        }
        if !self.cfg.holds(r.input_tokens, r.output_tokens) {
            self.refused += 1;
            return;
        }
        let t = Instant::now();
        let lengths = self.predicts.then(|| self.oracle.lengths(r)).flatten();
        self.predict_ns.push(t.elapsed().as_nanos() as u64);
        let arrival = Arrival {
            id: next as u64,
            input_tokens: r.input_tokens,
            max_tokens: None,
            priority: self.rules.classes.get(next).copied().unwrap_or(0),
            tenant: self.rules.tenants.get(next).copied().unwrap_or(0),
            lengths,
            ttft_slo: self.rules.ttft_slo.get(next).copied().flatten(),
            // Every step's tokens are reported.
            reports_first_token: true,
            ..Default::default()
        };
        self.handle(r.arrival, Input::Arrived(arrival), Some(next));
    }

    /// The run's outcome.
    fn finish(self) -> SimRun {
        let mut stats = RunStats::default();
        for e in self.engines {
            stats.absorb(e.finish());
        }
        stats.refused = self.refused;
        stats.shed = self.shed;
        stats.evicted = self.evicted.len() as u64;
        SimRun {
            stats,
            admitted: self.admitted,
            scheduler_ns: self.scheduler_ns,
            predict_ns: self.predict_ns,
            evicted: self.evicted,
            reclaimed: self.reclaimed,
            limits: self.limits,
            decided: self.decided,
        }
    }
}
