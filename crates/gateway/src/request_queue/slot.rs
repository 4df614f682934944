//! What a request holds while it waits and once it is admitted: each, dropped, tells the core
//! the request left, so a client that goes away frees its place in the queue or its slot.

use super::outcome::Taken;
use super::queue::RequestQueue;
use std::sync::Arc;
use tokio::sync::mpsc;
use xsched_llm_core::Input;

/// A request waiting in the queue; dropped before it was admitted (its client went away), it
/// leaves the core, which frees a slot it was given in the meantime.
pub(super) struct Waiting<'a> {
    pub(super) admission: &'a Arc<RequestQueue>,
    pub(super) id: u64,
    pub(super) admitted: bool,
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
    pub(super) admission: Arc<RequestQueue>,
    pub(super) id: u64,
    pub(super) upstream: usize,
    /// What the core does to it on its engine.
    pub(super) evicted: mpsc::UnboundedReceiver<Taken>,
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

    /// Whether its answer, silent for `silence`, waits its turn in its engine's own queue.
    pub fn waits_its_turn(&self, silence: std::time::Duration) -> bool {
        self.admission.waits_its_turn(self.upstream, silence)
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
