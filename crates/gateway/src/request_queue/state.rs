//! The core's decisions carried out: a request admitted or refused is woken with its answer,
//! and one taken off its engine is told so; the state this needs sits under the queue's lock.

use super::outcome::{RequestRefused, Taken};
use std::collections::HashMap;
use tokio::sync::{mpsc, oneshot};
use xsched_llm_core::{Decision, EvictReason, Input, RequestScheduler};

/// The core and the channels to the requests it decides on.
pub(super) struct State {
    pub(super) scheduler: RequestScheduler,
    /// How each request still known is told the core took it off its engine.
    pub(super) evictors: HashMap<u64, mpsc::UnboundedSender<Taken>>,
    /// Queued requests' wake-ups, by id.
    pub(super) waiters: HashMap<u64, oneshot::Sender<Result<usize, RequestRefused>>>,
    pub(super) next_id: u64,
}

impl State {
    /// Feed the core and carry out its decisions; the engine admitted, or the refusal, for
    /// `caller` (a request not yet waiting) if the core decided on it.
    pub(super) fn feed(
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
    pub(super) fn carry_out(
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
