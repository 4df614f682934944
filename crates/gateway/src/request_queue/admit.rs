//! A request's admission: it waits for the core to admit it (firing the core's timers while it
//! waits), then holds a [`Slot`] on the upstream it was given.

use super::outcome::{RequestRefused, Taken};
use super::queue::RequestQueue;
use super::slot::{Slot, Waiting};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use xsched_llm_core::{Arrival, Input};

impl RequestQueue {
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
}
