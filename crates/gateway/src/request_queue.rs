//! The gateway as a driver of the scheduling core (`xsched-llm-core`): the [`RequestScheduler`]
//! under a lock, fed the gateway's events with the time since it started, and a waiter per
//! queued request that its admission wakes. The core owns every decision (the queue, the order,
//! the aging guard, the engines' slots and learned limits, the router, eviction for a higher
//! class, taking requests back from a silent engine); this module owns only what is async: a
//! request waits here until the core admits it (firing the core's timers while it waits), then
//! holds a [`Slot`] until its answer ends or its client goes away, and dropping the slot tells
//! the core, which admits the next. What the core does to an admitted request on its engine
//! reaches the request's handler as [`Taken`].
//!
//! A wait that is given up (its client went away) tells the core the request is done, which
//! takes it out of the queue, or, if it was admitted in that instant, frees its slot: nothing
//! leaks either way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use xsched_llm_core::service::Served;
use xsched_llm_core::watch::Scrape;
use xsched_llm_core::{
    Arrival, Config, ConfigError, Decision, EvictReason, Input, RequestScheduler, ShedReason,
};

/// Why a request was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestRefused {
    /// The queue holds its bound already.
    #[error("the gateway's queue is full ({0} requests waiting)")]
    Full(usize),
    /// A sheddable request (class below 0) while the engines are saturated: it would wait
    /// beside too many of its kind, a higher class needed its place in a full queue, or the
    /// queue was full (the core's reason).
    #[error("sheddable request shed: the engines are saturated; retry later")]
    Shed(ShedReason),
    /// No upstream answers at all (each is hung or gone).
    #[error("no upstream answers (each is silent: hung or gone); retry later")]
    Silent,
    /// Its tenant holds its `max_requests` requests waiting or in flight.
    #[error("the tenant has its max_requests requests waiting or in flight")]
    TenantLimit,
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    Closed,
}

impl RequestRefused {
    /// The core's `reason`, for a request of `class` while `waiting` requests wait.
    fn of(reason: ShedReason, class: i32, waiting: usize) -> RequestRefused {
        match reason {
            ShedReason::QueueFull if class >= 0 => RequestRefused::Full(waiting),
            ShedReason::QueueFull | ShedReason::Displaced | ShedReason::Saturated => {
                RequestRefused::Shed(reason)
            }
            ShedReason::NoEngine => RequestRefused::Silent,
            ShedReason::TenantLimit => RequestRefused::TenantLimit,
        }
    }

    /// The core's reason (`None`: the gateway is closing).
    pub fn reason(self) -> Option<ShedReason> {
        match self {
            RequestRefused::Full(_) => Some(ShedReason::QueueFull),
            RequestRefused::Shed(reason) => Some(reason),
            RequestRefused::Silent => Some(ShedReason::NoEngine),
            RequestRefused::TenantLimit => Some(ShedReason::TenantLimit),
            RequestRefused::Closed => None,
        }
    }
}

struct State {
    scheduler: RequestScheduler,
    /// How each request still known is told the core took it off its engine.
    evictors: HashMap<u64, mpsc::UnboundedSender<Taken>>,
    /// Queued requests' wake-ups, by id.
    waiters: HashMap<u64, oneshot::Sender<Result<usize, RequestRefused>>>,
    next_id: u64,
}

impl State {
    /// Feed the core and carry out its decisions; the engine admitted, or the refusal, for
    /// `caller` (a request not yet waiting) if the core decided on it.
    fn feed(
        &mut self,
        now: f64,
        input: Input,
        caller: Option<(u64, i32)>,
    ) -> Option<Result<usize, RequestRefused>> {
        // Ids are the gateway's own counter and engines its own list: the core refuses neither.
        let fed = self.scheduler.handle(now, input);
        debug_assert!(fed.is_ok(), "{fed:?}");
        self.carry_out(now, caller)
    }

    /// Carry out the core's decisions (see [`State::feed`]).
    fn carry_out(
        &mut self,
        now: f64,
        caller: Option<(u64, i32)>,
    ) -> Option<Result<usize, RequestRefused>> {
        let mut mine = None;
        while let Some(d) = self.scheduler.poll_decision() {
            let (id, outcome) = match d {
                Decision::Admit { id, engine } => (id, Ok(engine)),
                Decision::Shed { id, reason } => {
                    let class = caller.filter(|c| c.0 == id).map_or(-1, |c| c.1);
                    let waiting = self.scheduler.waiting();
                    (id, Err(RequestRefused::of(reason, class, waiting)))
                }
                Decision::Evict {
                    id,
                    reason: EvictReason::Displaced,
                    ..
                } => {
                    // Its answer is cut and its slot freed where it is forwarded (`routes.rs`,
                    // `relay.rs`); one that has just ended frees its slot anyway.
                    tracing::debug!("request {id} evicted for a higher class");
                    self.take(id, Taken::Displaced);
                    continue;
                }
                Decision::Evict {
                    id,
                    engine,
                    reason: EvictReason::Unresponsive,
                } => {
                    // It waits again: its next admission (or refusal) comes to this waiter.
                    tracing::info!("request {id} taken back from silent upstream {engine}");
                    let (tx, rx) = oneshot::channel();
                    self.waiters.insert(id, tx);
                    self.take(id, Taken::Requeued(rx));
                    continue;
                }
                // The gateway's configuration cannot pause (`can_pause: false`).
                Decision::Evict {
                    reason: EvictReason::Paused,
                    ..
                } => continue,
                Decision::Limit {
                    engine,
                    concurrency,
                } => {
                    tracing::info!("upstream {engine}: concurrency learned: {concurrency}");
                    continue;
                }
            };
            if caller.is_some_and(|c| c.0 == id) {
                mine = Some(outcome);
            } else if let Some(tx) = self.waiters.remove(&id)
                && tx.send(outcome).is_err()
                && outcome.is_ok()
            {
                // Its client went away as it was admitted: free the slot at once.
                let _ = self.scheduler.handle(now, Input::Done { id });
            }
        }
        mine
    }

    /// Tell request `id`'s handler it was taken off its engine.
    fn take(&mut self, id: u64, taken: Taken) {
        if let Some(tx) = self.evictors.get(&id) {
            let _ = tx.send(taken);
        }
    }
}

/// What the core did to an admitted request.
#[derive(Debug)]
pub enum Taken {
    /// Evicted for a higher class: its answer is cut (its client told to retry).
    Displaced,
    /// Taken back from an engine that stopped answering before its answer began: its next
    /// admission (the upstream) or refusal comes here.
    Requeued(oneshot::Receiver<Result<usize, RequestRefused>>),
}

/// The queue and the slots of every upstream.
pub struct RequestQueue {
    state: Mutex<State>,
    start: Instant,
    upstreams: usize,
}

impl RequestQueue {
    /// A scheduler for `config` in front of the upstreams.
    pub fn new(config: Config) -> Result<Arc<RequestQueue>, ConfigError> {
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

    fn lock(&self) -> MutexGuard<'_, State> {
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
    fn instant(&self, at: f64) -> tokio::time::Instant {
        let at = std::time::Duration::try_from_secs_f64(at).unwrap_or_default();
        tokio::time::Instant::from_std(self.start + at)
    }

    /// Wait for a slot on some upstream, in the policy's order; the slot names the upstream.
    /// `arrival`'s id is the gateway's to set.
    pub async fn admit(self: &Arc<Self>, arrival: Arrival) -> Result<Slot, RequestRefused> {
        let class = arrival.priority;
        let (id, mut rx, evicted) = {
            let mut st = self.lock();
            let id = st.next_id;
            st.next_id += 1;
            // A request can be taken off its engine from the moment it is admitted.
            let (tx, evicted) = mpsc::unbounded_channel();
            st.evictors.insert(id, tx);
            let arrived = Input::Arrived(Arrival { id, ..arrival });
            let decided = st.feed(self.now(), arrived, Some((id, class)));
            match decided {
                Some(Ok(upstream)) => return Ok(self.slot(id, upstream, evicted)),
                Some(Err(e)) => {
                    st.evictors.remove(&id);
                    return Err(e);
                }
                None => {}
            }
            let (tx, rx) = oneshot::channel();
            st.waiters.insert(id, tx);
            (id, rx, evicted)
        };
        let mut waiting = Waiting {
            admission: self,
            id,
            admitted: false,
        };
        // The core's timers (a deadline's eviction) fire while requests wait.
        let woken = loop {
            let Some(at) = self.lock().scheduler.poll_timeout() else {
                break rx.await;
            };
            match tokio::time::timeout_at(self.instant(at), &mut rx).await {
                Ok(woken) => break woken,
                Err(_) => {
                    let mut st = self.lock();
                    st.scheduler.handle_timeout(self.now());
                    st.carry_out(self.now(), None);
                }
            }
        };
        let upstream = woken.map_err(|_| RequestRefused::Closed)??;
        waiting.admitted = true;
        Ok(self.slot(id, upstream, evicted))
    }

    /// Request `id`'s slot on `upstream`.
    fn slot(
        self: &Arc<Self>,
        id: u64,
        upstream: usize,
        evicted: mpsc::UnboundedReceiver<Taken>,
    ) -> Slot {
        Slot {
            admission: self.clone(),
            id,
            upstream,
            evicted,
        }
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
    fn tell(&self, input: Input) {
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
    fn engine_priority(&self, id: u64) -> Option<i64> {
        self.lock().scheduler.engine_priority(id)
    }

    /// Upstream `upstream` refused a number: the core orders and admits to it from now.
    /// Whether it was sent numbers until now (the first refusal).
    fn refuses_numbers(&self, upstream: usize) -> bool {
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
    fn progress(&self, id: u64, output_tokens: u32) {
        self.tell(Input::Progress {
            id,
            generated: output_tokens,
        });
    }

    /// The engine counted request `id`'s prompt as `tokens` (its tenant's service).
    fn prompt(&self, id: u64, tokens: u32) {
        self.tell(Input::Prompt { id, tokens });
    }

    /// Request `id` left (its answer ended, or its client went away).
    fn done(&self, id: u64) {
        let mut st = self.lock();
        st.waiters.remove(&id);
        st.evictors.remove(&id);
        let now = self.now();
        st.feed(now, Input::Done { id }, None);
    }
}

/// A request waiting in the queue; dropped before it was admitted (its client went away), it
/// leaves the core, which frees a slot it was given in the meantime.
struct Waiting<'a> {
    admission: &'a Arc<RequestQueue>,
    id: u64,
    admitted: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.admitted {
            self.admission.done(self.id);
        }
    }
}

/// A request's slot on one upstream; dropping it admits the next request.
pub struct Slot {
    admission: Arc<RequestQueue>,
    id: u64,
    upstream: usize,
    /// What the core does to it on its engine.
    evicted: mpsc::UnboundedReceiver<Taken>,
}

impl Slot {
    /// Whether the core took the request off its engine (`None` once nothing more can come).
    pub fn poll_taken(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Taken>> {
        self.evicted.poll_recv(cx)
    }

    /// The core admitted the request again, to `upstream`.
    pub fn moved(&mut self, upstream: usize) {
        self.upstream = upstream;
    }

    /// Its answer began reaching its client: it can no longer be taken back.
    pub fn answering(&self) {
        self.admission.tell(Input::Answering { id: self.id });
    }

    /// The upstream (an index into the gateway's list).
    pub fn upstream(&self) -> usize {
        self.upstream
    }

    /// The number to send it with, where its upstream orders its own queue by one.
    pub fn engine_priority(&self) -> Option<i64> {
        self.admission.engine_priority(self.id)
    }

    /// Its upstream refused the number: it is ordered in the gateway's queue from now. Whether
    /// this was the first refusal.
    pub fn refuses_numbers(&self) -> bool {
        self.admission.refuses_numbers(self.upstream)
    }

    /// Its answer had `output_tokens` so far: its tenant's share counts them.
    pub fn charge(&self, output_tokens: u32) {
        self.admission.progress(self.id, output_tokens);
    }

    /// The engine counted its prompt as `tokens`: its tenant's share counts those instead of the
    /// estimate it was charged at admission.
    pub fn prompt(&self, tokens: u32) {
        self.admission.prompt(self.id, tokens);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.done(self.id);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.id)
            .field("upstream", &self.upstream)
            .finish()
    }
}

/// An admission for `policy` over `upstreams` alike (the gateway's own configuration), for
/// tests.
#[cfg(test)]
pub(crate) fn for_tests(
    policy: &str,
    upstreams: usize,
    concurrency: usize,
    max_waiting: usize,
) -> Arc<RequestQueue> {
    use xsched_llm_core::service::{Rates, ServiceModel};
    use xsched_llm_core::{EngineLimits, Placement, RequestPolicySpec, Router};
    RequestQueue::new(Config {
        policy: policy.parse::<RequestPolicySpec>().expect("policy"),
        engines: vec![
            EngineLimits {
                concurrency,
                kv_tokens: None,
                block_tokens: 16,
            };
            upstreams
        ],
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting,
        service: ServiceModel::Measured(Rates::default()),
        can_pause: false,
        knows_truth: false,
        fairness: xsched_llm_core::Fairness::default(),
        learn_concurrency: false,
        engine_order: None,
    })
    .expect("valid")
}

/// A request predicted to answer `tokens` tokens, for tests.
#[cfg(test)]
pub(crate) fn arrival_for_tests(tokens: f64) -> Arrival {
    Arrival {
        id: 0,
        input_tokens: 10,
        max_tokens: None,
        priority: 0,
        tenant: 0,
        lengths: xsched_llm_core::SizeDistribution::point(tokens),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use arrival_for_tests as arrival;
    use for_tests as admission;

    type Pending<'a> = std::pin::Pin<Box<dyn Future<Output = Result<Slot, RequestRefused>> + 'a>>;

    fn poll_admit<'a>(
        a: &'a Arc<RequestQueue>,
        tokens: f64,
        cx: &mut Context<'_>,
    ) -> Result<Slot, Pending<'a>> {
        let mut f: Pending<'a> = Box::pin(a.admit(arrival(tokens)));
        match f.as_mut().poll(cx) {
            Poll::Ready(r) => Ok(r.expect("admitted")),
            Poll::Pending => Err(f),
        }
    }

    #[test]
    fn waiters_are_admitted_in_the_policys_order_as_slots_free() {
        let a = admission("sagesched", 1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let held = poll_admit(&a, 5.0, &mut cx).unwrap_or_else(|_| panic!("free"));
        let mut waits: Vec<(f64, Option<Pending>)> = [300.0, 10.0, 20.0]
            .into_iter()
            .map(|t| (t, poll_admit(&a, t, &mut cx).err()))
            .collect();
        assert_eq!(a.load(1), (3, vec![1]));
        drop(held);
        let mut order = Vec::new();
        for _ in 0..3 {
            let (tokens, slot) = waits
                .iter_mut()
                .find_map(|(t, w)| match w.as_mut()?.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => {
                        *w = None;
                        Some((*t, r.expect("admitted")))
                    }
                    Poll::Pending => None,
                })
                .expect("one was admitted");
            order.push(tokens);
            drop(slot);
        }
        assert_eq!(order, [10.0, 20.0, 300.0], "shortest predicted first");
        assert_eq!(a.load(1), (0, vec![0]));
    }

    #[test]
    fn a_waiter_given_up_as_its_slot_arrives_passes_the_slot_on() {
        let a = admission("fcfs", 1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let held = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("free"));
        let queued = poll_admit(&a, 1.0, &mut cx).expect_err("queued");
        assert_eq!(a.load(1), (1, vec![1]));
        // The held slot goes to the waiter, which is dropped before it runs again.
        drop(held);
        drop(queued);
        assert_eq!(a.load(1), (0, vec![0]), "no slot leaked");
        // Waiters given up while every slot is busy leave the queue at once.
        let _busy = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("free again"));
        for _ in 0..8 {
            drop(poll_admit(&a, 1.0, &mut cx).expect_err("queued"));
        }
        assert_eq!(a.load(1), (0, vec![1]), "the queue holds no dead waiters");
    }

    #[test]
    fn past_its_bound_the_queue_refuses_and_gone_waiters_take_no_slot() {
        let a = admission("fcfs", 2, 1, 1);
        let mut cx = Context::from_waker(Waker::noop());
        let s1 = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("upstream 0"));
        let s2 = poll_admit(&a, 1.0, &mut cx).unwrap_or_else(|_| panic!("upstream 1"));
        assert_ne!(s1.upstream(), s2.upstream(), "the least loaded upstream");
        let waiting = poll_admit(&a, 1.0, &mut cx).expect_err("queued");
        assert_eq!(a.refusal(0, 0), Some(RequestRefused::Full(1)));
        assert_eq!(
            a.refusal(-1, 0),
            Some(RequestRefused::Shed(ShedReason::QueueFull)),
            "sheddable: shed"
        );
        let mut refused = Box::pin(a.admit(arrival(1.0)));
        assert_eq!(
            refused.as_mut().poll(&mut cx).map(|r| r.err()),
            Poll::Ready(Some(RequestRefused::Full(1)))
        );
        drop(waiting);
        assert_eq!(a.load(2), (0, vec![1, 1]));
        drop(s1);
        assert_eq!(a.load(2), (0, vec![0, 1]), "the gone waiter took no slot");
        drop(s2);
        assert_eq!(a.arrivals(), 4);
    }
}
