//! The queue itself: the scheduling core under a lock, fed the gateway's events (answers,
//! scrapes, failures, a request's progress and its leaving) with the time since the start.

use super::outcome::RequestRefused;
use super::state::State;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use xsched_llm_core::service::Served;
use xsched_llm_core::watch::Scrape;
use xsched_llm_core::{Config, Input, RequestScheduler, SchedulerError};

/// The queue and the slots of every upstream.
pub struct RequestQueue {
    state: Mutex<State>,
    start: Instant,
    upstreams: usize,
}

impl RequestQueue {
    /// A scheduler for `config` in front of the upstreams (the server's start turns the core's
    /// refusal into a [`GatewayError`](crate::GatewayError)).
    pub(crate) fn new(config: Config) -> Result<Arc<RequestQueue>, SchedulerError> {
        let upstreams = config.engines.len();
        Ok(Arc::new(RequestQueue {
            state: Mutex::new(State {
                scheduler: RequestScheduler::new(config)?,
                evictors: HashMap::new(),
                waiters: HashMap::new(),
                next_id: 0,
            }),
            start: Instant::now(),
            upstreams,
        }))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Critical sections feed the core, whose every input leaves it whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Seconds since the start: the time the core is fed.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The instant of `at` on the core's clock (seconds since the start).
    pub(super) fn instant(&self, at: f64) -> tokio::time::Instant {
        let at = std::time::Duration::try_from_secs_f64(at).unwrap_or_default();
        tokio::time::Instant::from_std(self.start + at)
    }

    /// Why the core would refuse a request of `class` from `tenant` arriving now (its tenant's
    /// limit, no engine answering, a full queue), before its prompt is predicted.
    pub fn refusal(&self, class: i32, tenant: usize) -> Option<RequestRefused> {
        let st = self.lock();
        let reason = st.scheduler.refusal(class, tenant)?;
        Some(RequestRefused::of(reason, class, st.scheduler.waiting()))
    }

    /// Requests that asked for a slot so far (admitted, waiting, refused or gone).
    pub fn arrivals(&self) -> u64 {
        self.lock().next_id
    }

    /// How many requests wait, and how many are in flight on each upstream.
    pub fn load(&self, upstreams: usize) -> (usize, Vec<usize>) {
        let st = self.lock();
        let s = &st.scheduler;
        (
            s.waiting(),
            (0..upstreams).map(|u| s.outstanding(u)).collect(),
        )
    }

    /// Feed `input` to the core now and carry out its decisions.
    pub(super) fn tell(&self, input: Input) {
        let mut st = self.lock();
        let now = self.now();
        st.feed(now, input, None);
    }

    /// An answer's measured service (the core's rates: the aging guard, `sagesched-time`).
    pub fn served(&self, served: Served) {
        self.tell(Input::Served(served));
    }

    /// What a scrape of upstream `upstream` brought back (`engines.rs`).
    pub fn scraped(&self, upstream: usize, scrape: Scrape) {
        self.tell(Input::Scraped {
            engine: upstream,
            scrape,
        });
    }

    /// A request to upstream `upstream` failed at the transport level (`health.rs`): the core
    /// ejects it for a backoff.
    pub fn failed(&self, upstream: usize) {
        self.tell(Input::Failed { engine: upstream });
    }

    /// Upstream `upstream` answered a request (any status): its backoff starts over.
    pub fn replied(&self, upstream: usize) {
        self.tell(Input::Replied { engine: upstream });
    }

    /// What the core sees of each upstream from outside (metrics, ejection).
    pub fn watched(&self) -> Vec<xsched_llm_core::watch::Watched> {
        let st = self.lock();
        (0..self.upstreams)
            .filter_map(|u| st.scheduler.watched(u).copied())
            .collect()
    }

    /// Whether an answer upstream `upstream` has sent nothing of for `silence` waits its turn
    /// in that engine's own queue rather than on a hung engine (the core's rule,
    /// [`Watched::queues_while_working`](xsched_llm_core::watch::Watched::queues_while_working)).
    pub fn waits_its_turn(&self, upstream: usize, silence: std::time::Duration) -> bool {
        let now = self.now();
        self.lock()
            .scheduler
            .watched(upstream)
            .is_some_and(|w| w.queues_while_working(now, silence.as_secs_f64()))
    }

    /// An answer of `output_tokens` from upstream `upstream`, `service_s` seconds after its
    /// admission, ended (before its slot is freed): the core's concurrency learner counts it.
    pub fn answered(&self, upstream: usize, output_tokens: u32, service_s: f64) {
        self.tell(Input::Answered {
            engine: upstream,
            output_tokens,
            service_s,
        });
    }

    /// Each upstream's learned concurrency (empty when it is not learned).
    pub fn learned(&self) -> Vec<usize> {
        let st = self.lock();
        (0..self.upstreams)
            .filter_map(|u| st.scheduler.learned(u))
            .collect()
    }

    /// The number request `id` is sent to its engine with, where that engine orders its own
    /// queue (`--order-at engine`).
    pub(super) fn engine_priority(&self, id: u64) -> Option<i64> {
        self.lock().scheduler.engine_priority(id)
    }

    /// Upstream `upstream` refused a number: the core orders and admits to it from now.
    /// Whether it was sent numbers until now (the first refusal).
    pub(super) fn refuses_numbers(&self, upstream: usize) -> bool {
        let mut st = self.lock();
        let was = st.scheduler.engine_orders(upstream);
        let now = self.now();
        let input = Input::EngineOrders {
            engine: upstream,
            orders: false,
        };
        st.feed(now, input, None);
        was
    }

    /// Request `id`'s answer had `output_tokens` (its tenant's service).
    pub(super) fn progress(&self, id: u64, output_tokens: u32) {
        self.tell(Input::Progress {
            id,
            generated: output_tokens,
        });
    }

    /// The engine counted request `id`'s prompt as `tokens` (its tenant's service).
    pub(super) fn prompt(&self, id: u64, tokens: u32) {
        self.tell(Input::Prompt { id, tokens });
    }

    /// Request `id` left (its answer ended, or its client went away).
    pub(super) fn done(&self, id: u64) {
        let mut st = self.lock();
        st.waiters.remove(&id);
        st.evictors.remove(&id);
        let now = self.now();
        st.feed(now, Input::Done { id }, None);
    }
}
