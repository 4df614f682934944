//! The gateway's queue and its upstreams' slots. A request waits here until an upstream has a
//! free slot (fewer than the concurrency limit of requests in flight there) and no request
//! ahead of it in the policy's order waits too; it then holds a [`Slot`] until its answer ends or
//! its client goes away, and dropping the slot admits the next. At most `max_waiting` requests
//! wait: past that a request is refused at once (a 429), so a flood costs bounded memory.
//!
//! Among upstreams with a free slot, a request goes to the one with the fewest in flight.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// A request's place in the queue: lower is admitted first (first-come-first-served: its
/// arrival number).
pub type Rank = u64;

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

struct State {
    in_flight: Vec<usize>,
    /// Waiting requests by (rank, arrival).
    waiting: BTreeMap<(Rank, u64), oneshot::Sender<usize>>,
    arrivals: u64,
}

/// The queue and the slots of every upstream.
pub struct Admission {
    state: Mutex<State>,
    concurrency: usize,
    max_waiting: usize,
}

impl Admission {
    /// `upstreams` upstreams of `concurrency` slots each, at most `max_waiting` waiting.
    pub fn new(upstreams: usize, concurrency: usize, max_waiting: usize) -> Arc<Admission> {
        Arc::new(Admission {
            state: Mutex::new(State {
                in_flight: vec![0; upstreams.max(1)],
                waiting: BTreeMap::new(),
                arrivals: 0,
            }),
            concurrency: concurrency.max(1),
            max_waiting,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Critical sections are a few map and counter updates that cannot leave them torn.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for a slot on some upstream, in `rank` order; the slot names the upstream. A wait
    /// that is given up (its client went away) leaves the queue at once, and a slot handed to it
    /// in that instant is passed on.
    pub async fn admit(self: &Arc<Self>, rank: Rank) -> Result<Slot, Refused> {
        let mut waiting = {
            let mut st = self.lock();
            let arrival = st.arrivals;
            st.arrivals += 1;
            if st.waiting.is_empty()
                && let Some(u) = self.free_upstream(&st)
            {
                st.in_flight[u] += 1;
                return Ok(self.slot(u));
            }
            if st.waiting.len() >= self.max_waiting {
                return Err(Refused::Full(st.waiting.len()));
            }
            let (tx, rx) = oneshot::channel();
            st.waiting.insert((rank, arrival), tx);
            Waiting {
                admission: self,
                key: (rank, arrival),
                rx,
                admitted: false,
            }
        };
        let u = (&mut waiting.rx).await.map_err(|_| Refused::Closed)?;
        waiting.admitted = true;
        Ok(self.slot(u))
    }

    /// Requests that asked for a slot so far (admitted, waiting, refused or gone).
    pub fn arrivals(&self) -> u64 {
        self.lock().arrivals
    }

    /// How many requests wait, and how many are in flight on each upstream.
    pub fn load(&self) -> (usize, Vec<usize>) {
        let st = self.lock();
        (st.waiting.len(), st.in_flight.clone())
    }

    fn free_upstream(&self, st: &State) -> Option<usize> {
        (0..st.in_flight.len())
            .filter(|&u| st.in_flight[u] < self.concurrency)
            .min_by_key(|&u| st.in_flight[u])
    }

    fn slot(self: &Arc<Self>, upstream: usize) -> Slot {
        Slot {
            admission: self.clone(),
            upstream,
        }
    }

    /// A slot of `upstream` is free: hand it (or another free one) to the first waiter still
    /// there.
    fn release(&self, upstream: usize) {
        let mut st = self.lock();
        st.in_flight[upstream] = st.in_flight[upstream].saturating_sub(1);
        while let Some(u) = self.free_upstream(&st) {
            let Some((_, tx)) = st.waiting.pop_first() else {
                return;
            };
            st.in_flight[u] += 1;
            if tx.send(u).is_err() {
                // Its client went away while it waited.
                st.in_flight[u] -= 1;
            }
        }
    }
}

/// A request waiting in the queue. Dropped before it was admitted (its client went away), it
/// leaves the queue; if a slot was sent to it in the meantime, it releases that slot.
struct Waiting<'a> {
    admission: &'a Arc<Admission>,
    key: (Rank, u64),
    rx: oneshot::Receiver<usize>,
    admitted: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        let mut st = self.admission.lock();
        if st.waiting.remove(&self.key).is_some() {
            return;
        }
        drop(st);
        // `release` sent it a slot (under the lock, so it is in the channel now).
        if let Ok(u) = self.rx.try_recv() {
            self.admission.release(u);
        }
    }
}

/// A request's slot on one upstream; dropping it admits the next request.
pub struct Slot {
    admission: Arc<Admission>,
    upstream: usize,
}

impl Slot {
    /// The upstream (an index into the gateway's list).
    pub fn upstream(&self) -> usize {
        self.upstream
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.release(self.upstream);
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

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn waiters_are_admitted_in_rank_order_as_slots_free() {
        runtime().block_on(async {
            let a = Admission::new(1, 1, 8);
            let first = a.admit(0).await.expect("a free slot");
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for rank in [30, 10, 20] {
                let (a, tx) = (a.clone(), tx.clone());
                tokio::spawn(async move {
                    let slot = a.admit(rank).await.expect("admitted");
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
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let a = Admission::new(1, 1, 8);
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(a.admit(0));
        let Poll::Ready(Ok(held)) = first.as_mut().poll(&mut cx) else {
            panic!("the free slot is taken at once");
        };
        let mut queued = Box::pin(a.admit(5));
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        assert_eq!(a.load(), (1, vec![1]));
        // The held slot goes to the waiter, which is dropped before it runs again.
        drop(held);
        drop(queued);
        assert_eq!(a.load(), (0, vec![0]), "no slot leaked");
        // Waiters given up while every slot is busy leave the queue at once.
        let mut busy = Box::pin(a.admit(0));
        let Poll::Ready(Ok(_held)) = busy.as_mut().poll(&mut cx) else {
            panic!("free again");
        };
        for rank in 0..8 {
            let mut w = Box::pin(a.admit(rank));
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(a.load(), (0, vec![1]), "the queue holds no dead waiters");
    }

    #[test]
    fn past_its_bound_the_queue_refuses_and_gone_waiters_are_skipped() {
        runtime().block_on(async {
            let a = Admission::new(2, 1, 1);
            let s1 = a.admit(0).await.expect("upstream 0");
            let s2 = a.admit(0).await.expect("upstream 1");
            assert_ne!(s1.upstream(), s2.upstream(), "the least loaded upstream");
            let waiting = {
                let a = a.clone();
                tokio::spawn(async move { a.admit(5).await.map(|s| s.upstream()) })
            };
            while a.load().0 < 1 {
                tokio::task::yield_now().await;
            }
            assert_eq!(a.admit(1).await.err(), Some(Refused::Full(1)));
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
}
