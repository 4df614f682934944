//! The gateway's queue and its upstreams' slots. A request waits here until an upstream has a
//! free slot (fewer than the concurrency limit of requests in flight there) and no request
//! ahead of it in the policy's order waits too; it then holds a [`Slot`] until its answer ends or
//! its client goes away, and dropping the slot admits the next. At most `max_waiting` requests
//! wait: past that a request is refused at once (a 429), so a flood costs bounded memory.
//!
//! The starvation guard: a request may carry a time at which it has aged ([`Ticket::aged_at`]);
//! from then on it is admitted before every request that has not aged, aged ones first come
//! first served (the ShareGPT issue's aging guard; `order.rs` sets the time).
//!
//! Among upstreams with a free slot, the [`Router`] picks: the next in turn, the fewest in
//! flight, or the least predicted cost outstanding.

use crate::route::Router;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::oneshot;

/// A request's place in the queue: lower is admitted first. Ordered by `f64::total_cmp`.
#[derive(Clone, Copy, Debug)]
pub struct Rank(pub f64);

impl PartialEq for Rank {
    fn eq(&self, other: &Rank) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Rank {}
impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Rank) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Rank {
    fn cmp(&self, other: &Rank) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// What the queue needs of a request.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    /// Its place in the policy's order.
    pub rank: Rank,
    /// When it has waited too long and goes before every request that has not (`None`: never).
    pub aged_at: Option<Instant>,
    /// Its predicted cost, for the cost-aware router (0 when nothing is predicted).
    pub cost: f64,
}

impl Ticket {
    /// A ticket in `rank` order with no guard and no cost.
    pub fn ranked(rank: f64) -> Ticket {
        Ticket {
            rank: Rank(rank),
            aged_at: None,
            cost: 0.0,
        }
    }
}

/// Why a request was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The queue holds its bound already.
    #[error("the gateway's queue is full ({0} requests waiting)")]
    Full(usize),
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    Closed,
}

/// A waiting request's key: its rank, then its arrival.
type Key = (Rank, u64);

struct Waiter {
    tx: oneshot::Sender<usize>,
    aged_at: Option<Instant>,
    cost: f64,
}

/// What the router sees of the upstreams.
pub(crate) struct Upstreams {
    /// Requests in flight on each.
    pub in_flight: Vec<usize>,
    /// The predicted cost of what each was sent and has not finished.
    pub outstanding: Vec<f64>,
    /// The round-robin router's next turn.
    pub turn: usize,
}

struct State {
    upstreams: Upstreams,
    waiting: BTreeMap<Key, Waiter>,
    /// Waiters with a guard that have not aged yet, by when they age.
    aging: BTreeMap<(Instant, u64), Key>,
    /// Waiters that have aged, by arrival.
    aged: BTreeMap<u64, Key>,
    arrivals: u64,
}

impl State {
    /// Take a waiter out of the queue and out of the guard's indexes.
    fn remove(&mut self, key: Key) -> Option<Waiter> {
        let w = self.waiting.remove(&key)?;
        if let Some(at) = w.aged_at
            && self.aging.remove(&(at, key.1)).is_none()
        {
            self.aged.remove(&key.1);
        }
        Some(w)
    }

    /// The next waiter to admit at `now`: the first aged one, else the first by rank.
    fn next(&mut self, now: Instant) -> Option<Waiter> {
        while let Some(entry) = self.aging.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.aged.insert(key.1, key);
        }
        let key = match self.aged.first_key_value() {
            Some((_, key)) => *key,
            None => *self.waiting.first_key_value()?.0,
        };
        self.remove(key)
    }
}

/// The queue and the slots of every upstream.
pub struct Admission {
    state: Mutex<State>,
    concurrency: usize,
    max_waiting: usize,
    router: Router,
}

impl Admission {
    /// `upstreams` upstreams of `concurrency` slots each, chosen by `router`, at most
    /// `max_waiting` waiting.
    pub fn new(
        upstreams: usize,
        concurrency: usize,
        max_waiting: usize,
        router: Router,
    ) -> Arc<Admission> {
        let n = upstreams.max(1);
        Arc::new(Admission {
            state: Mutex::new(State {
                upstreams: Upstreams {
                    in_flight: vec![0; n],
                    outstanding: vec![0.0; n],
                    turn: 0,
                },
                waiting: BTreeMap::new(),
                aging: BTreeMap::new(),
                aged: BTreeMap::new(),
                arrivals: 0,
            }),
            concurrency: concurrency.max(1),
            max_waiting,
            router,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Critical sections are a few map and counter updates that cannot leave them torn.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for a slot on some upstream, in the tickets' order; the slot names the upstream. A
    /// wait that is given up (its client went away) leaves the queue at once, and a slot handed
    /// to it in that instant is passed on.
    pub async fn admit(self: &Arc<Self>, ticket: Ticket) -> Result<Slot, Refused> {
        let mut waiting = {
            let mut st = self.lock();
            let arrival = st.arrivals;
            st.arrivals += 1;
            if st.waiting.is_empty()
                && let Some(u) = self.take(&mut st.upstreams, ticket.cost)
            {
                return Ok(self.slot(u, ticket.cost));
            }
            if st.waiting.len() >= self.max_waiting {
                return Err(Refused::Full(st.waiting.len()));
            }
            let (tx, rx) = oneshot::channel();
            let key = (ticket.rank, arrival);
            if let Some(at) = ticket.aged_at {
                st.aging.insert((at, arrival), key);
            }
            st.waiting.insert(
                key,
                Waiter {
                    tx,
                    aged_at: ticket.aged_at,
                    cost: ticket.cost,
                },
            );
            Waiting {
                admission: self,
                key,
                cost: ticket.cost,
                rx,
                admitted: false,
            }
        };
        let u = (&mut waiting.rx).await.map_err(|_| Refused::Closed)?;
        waiting.admitted = true;
        Ok(self.slot(u, ticket.cost))
    }

    /// `Some` when the queue holds its bound (a request arriving now would be refused).
    pub fn full(&self) -> Option<Refused> {
        let n = self.lock().waiting.len();
        (n >= self.max_waiting).then_some(Refused::Full(n))
    }

    /// Requests that asked for a slot so far (admitted, waiting, refused or gone).
    pub fn arrivals(&self) -> u64 {
        self.lock().arrivals
    }

    /// How many requests wait, and how many are in flight on each upstream.
    pub fn load(&self) -> (usize, Vec<usize>) {
        let st = self.lock();
        (st.waiting.len(), st.upstreams.in_flight.clone())
    }

    /// Pick an upstream with a free slot and count a request of `cost` on it.
    fn take(&self, up: &mut Upstreams, cost: f64) -> Option<usize> {
        let u = self.router.pick(up, self.concurrency)?;
        self.router.sent(up, u);
        up.in_flight[u] += 1;
        up.outstanding[u] += cost;
        Some(u)
    }

    fn slot(self: &Arc<Self>, upstream: usize, cost: f64) -> Slot {
        Slot {
            admission: self.clone(),
            upstream,
            cost,
        }
    }

    /// A request of `cost` left `upstream`: hand free slots to the first waiters still there.
    fn release(&self, upstream: usize, cost: f64) {
        let mut st = self.lock();
        let up = &mut st.upstreams;
        up.in_flight[upstream] = up.in_flight[upstream].saturating_sub(1);
        up.outstanding[upstream] = (up.outstanding[upstream] - cost).max(0.0);
        let now = Instant::now();
        while self.router.pick(&st.upstreams, self.concurrency).is_some() {
            let Some(w) = st.next(now) else {
                return;
            };
            // `pick` just found a free upstream and nothing changed since: `take` finds it too.
            let Some(u) = self.take(&mut st.upstreams, w.cost) else {
                debug_assert!(false, "a free upstream vanished under the lock");
                return;
            };
            if w.tx.send(u).is_err() {
                // Its client went away while it waited.
                let up = &mut st.upstreams;
                up.in_flight[u] -= 1;
                up.outstanding[u] = (up.outstanding[u] - w.cost).max(0.0);
            }
        }
    }
}

/// A request waiting in the queue. Dropped before it was admitted (its client went away), it
/// leaves the queue; if a slot was sent to it in the meantime, it releases that slot.
struct Waiting<'a> {
    admission: &'a Arc<Admission>,
    key: Key,
    cost: f64,
    rx: oneshot::Receiver<usize>,
    admitted: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        let mut st = self.admission.lock();
        if st.remove(self.key).is_some() {
            return;
        }
        drop(st);
        // `release` sent it a slot (under the lock, so it is in the channel now).
        if let Ok(u) = self.rx.try_recv() {
            self.admission.release(u, self.cost);
        }
    }
}

/// A request's slot on one upstream; dropping it admits the next request.
pub struct Slot {
    admission: Arc<Admission>,
    upstream: usize,
    cost: f64,
}

impl Slot {
    /// The upstream (an index into the gateway's list).
    pub fn upstream(&self) -> usize {
        self.upstream
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.release(self.upstream, self.cost);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("upstream", &self.upstream)
            .finish()
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn t(rank: u64) -> Ticket {
        Ticket::ranked(rank as f64)
    }

    fn fifo(upstreams: usize, concurrency: usize, max_waiting: usize) -> Arc<Admission> {
        Admission::new(
            upstreams,
            concurrency,
            max_waiting,
            Router::LeastOutstanding,
        )
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn waiters_are_admitted_in_rank_order_as_slots_free() {
        runtime().block_on(async {
            let a = fifo(1, 1, 8);
            let first = a.admit(t(0)).await.expect("a free slot");
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for rank in [30, 10, 20] {
                let (a, tx) = (a.clone(), tx.clone());
                tokio::spawn(async move {
                    let slot = a.admit(t(rank)).await.expect("admitted");
                    let _ = tx.send(rank);
                    drop(slot);
                });
            }
            // Let all three queue behind the held slot.
            while a.load().0 < 3 {
                tokio::task::yield_now().await;
            }
            drop(first);
            let order = [rx.recv().await, rx.recv().await, rx.recv().await];
            assert_eq!(order, [Some(10), Some(20), Some(30)]);
            assert_eq!(a.load(), (0, vec![0]));
        });
    }

    #[test]
    fn a_waiter_given_up_as_its_slot_arrives_passes_the_slot_on() {
        use std::task::{Context, Poll, Waker};
        let a = fifo(1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(a.admit(t(0)));
        let Poll::Ready(Ok(held)) = first.as_mut().poll(&mut cx) else {
            panic!("the free slot is taken at once");
        };
        let mut queued = Box::pin(a.admit(t(5)));
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        assert_eq!(a.load(), (1, vec![1]));
        // The held slot goes to the waiter, which is dropped before it runs again.
        drop(held);
        drop(queued);
        assert_eq!(a.load(), (0, vec![0]), "no slot leaked");
        // Waiters given up while every slot is busy leave the queue at once.
        let mut busy = Box::pin(a.admit(t(0)));
        let Poll::Ready(Ok(_held)) = busy.as_mut().poll(&mut cx) else {
            panic!("free again");
        };
        for rank in 0..8 {
            let mut w = Box::pin(a.admit(t(rank)));
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(a.load(), (0, vec![1]), "the queue holds no dead waiters");
    }

    #[test]
    fn past_its_bound_the_queue_refuses_and_gone_waiters_are_skipped() {
        runtime().block_on(async {
            let a = fifo(2, 1, 1);
            let s1 = a.admit(t(0)).await.expect("upstream 0");
            let s2 = a.admit(t(0)).await.expect("upstream 1");
            assert_ne!(s1.upstream(), s2.upstream(), "the least loaded upstream");
            let waiting = {
                let a = a.clone();
                tokio::spawn(async move { a.admit(t(5)).await.map(|s| s.upstream()) })
            };
            while a.load().0 < 1 {
                tokio::task::yield_now().await;
            }
            assert_eq!(a.admit(t(1)).await.err(), Some(Refused::Full(1)));
            waiting.abort();
            let _ = waiting.await;
            assert_eq!(
                a.load(),
                (0, vec![1, 1]),
                "the aborted waiter left the queue"
            );
            drop(s1);
            assert_eq!(a.load(), (0, vec![0, 1]), "and took no slot");
            drop(s2);
        });
    }

    /// A wait for a slot, pending.
    type Pending<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Slot, Refused>> + 'a>>;

    /// Poll `admit` once: the slot if it was free, else the pending wait.
    fn try_admit<'a>(
        a: &'a Arc<Admission>,
        ticket: Ticket,
        cx: &mut std::task::Context<'_>,
    ) -> Result<Slot, Pending<'a>> {
        let mut f: Pending<'a> = Box::pin(a.admit(ticket));
        match f.as_mut().poll(cx) {
            std::task::Poll::Ready(r) => Ok(r.expect("admitted")),
            std::task::Poll::Pending => Err(f),
        }
    }

    /// A slot that must be free at once.
    fn free(a: &Arc<Admission>, ticket: Ticket, cx: &mut std::task::Context<'_>) -> Slot {
        try_admit(a, ticket, cx).unwrap_or_else(|_| panic!("a free slot"))
    }

    /// A wait that must be queued.
    fn queued<'a>(
        a: &'a Arc<Admission>,
        ticket: Ticket,
        cx: &mut std::task::Context<'_>,
    ) -> Pending<'a> {
        match try_admit(a, ticket, cx) {
            Ok(_) => panic!("queued, not admitted"),
            Err(p) => p,
        }
    }

    #[test]
    fn an_aged_waiter_goes_before_better_ranked_ones_and_aged_ones_keep_arrival_order() {
        use std::task::{Context, Poll, Waker};
        let a = fifo(1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let held = free(&a, t(0), &mut cx);
        let past = Instant::now() - std::time::Duration::from_secs(1);
        let future = Instant::now() + std::time::Duration::from_secs(3600);
        let ticket = |rank: f64, aged_at| Ticket {
            rank: Rank(rank),
            aged_at,
            cost: 0.0,
        };
        // Arrival order: a long one that has aged, a short one, another aged one, a guarded
        // one that ages in an hour.
        let mut waits = [
            ticket(900.0, Some(past)),
            ticket(1.0, None),
            ticket(800.0, Some(past + std::time::Duration::from_millis(500))),
            ticket(2.0, Some(future)),
        ]
        .map(|tk| Some(queued(&a, tk, &mut cx)));
        drop(held);
        let mut order = Vec::new();
        for _ in 0..waits.len() {
            let (k, slot) = waits
                .iter_mut()
                .enumerate()
                .find_map(|(k, w)| match w.as_mut()?.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => {
                        *w = None;
                        Some((k, r.expect("admitted")))
                    }
                    Poll::Pending => None,
                })
                .expect("one was admitted");
            order.push(k);
            drop(slot);
        }
        assert_eq!(order, [0, 2, 1, 3], "aged by arrival, then by rank");
        assert_eq!(a.load(), (0, vec![0]));
    }

    #[test]
    fn a_waiter_given_up_leaves_the_guards_indexes_too() {
        use std::task::{Context, Waker};
        let a = fifo(1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let held = free(&a, t(0), &mut cx);
        let aged = Ticket {
            rank: Rank(5.0),
            aged_at: Some(Instant::now()),
            cost: 0.0,
        };
        drop(queued(&a, aged, &mut cx));
        let mut next = queued(&a, t(9), &mut cx);
        drop(held);
        assert!(
            matches!(next.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok(_))),
            "the gone aged waiter did not take the slot"
        );
        let st = a.lock();
        assert!(st.aging.is_empty() && st.aged.is_empty() && st.waiting.is_empty());
    }

    #[test]
    fn the_cost_aware_router_balances_predicted_cost_and_releases_it() {
        use std::task::{Context, Waker};
        let a = Admission::new(2, 4, 8, Router::CostAware);
        let mut cx = Context::from_waker(Waker::noop());
        let cost = |c: f64| Ticket {
            cost: c,
            ..Ticket::ranked(0.0)
        };
        let big = free(&a, cost(1000.0), &mut cx);
        let small: Vec<Slot> = (0..3).map(|_| free(&a, cost(10.0), &mut cx)).collect();
        assert!(small.iter().all(|s| s.upstream() != big.upstream()));
        assert_eq!(
            a.load().1,
            if big.upstream() == 0 {
                vec![1, 3]
            } else {
                vec![3, 1]
            }
        );
        drop(big);
        let st = a.lock();
        assert_eq!(st.upstreams.outstanding.iter().sum::<f64>(), 30.0);
    }
}
