//! One admitted request's life after admission, reported as it happens: its slot on an engine
//! (freed when the answer ends, which admits the next), its times for the metrics, its answer's
//! tokens charged to its tenant as they pass, and, when the answer ends whole, its length and
//! service learned by the predictor, the core's service model and the concurrency learner.
//!
//! The relay (`relay.rs`) tells it each chunk and how the answer ended; a client that goes away
//! mid-answer drops the relay and with it this object, which then reports its end as a client
//! that left: what passed is charged, and the tally decides whether the answer was whole (a
//! client may close as soon as it has read a stream's `[DONE]`).

use crate::forecast::{Forecast, Forecaster};
use crate::metrics::Metrics;
use crate::relay::{AnswerWatch, Ended};
use crate::request_queue::{RequestQueue, Slot, Taken};
use crate::tally::Tally;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// When a request arrived, and where its answer's first and last byte are recorded.
pub struct Timing {
    /// The gateway's metrics.
    pub metrics: Arc<Metrics>,
    /// The request's arrival.
    pub arrival: Instant,
    /// Its class band (`metrics::band`).
    pub band: usize,
    /// Its tenant.
    pub tenant: usize,
    /// Its TTFT deadline, if it asked for one.
    pub ttft_slo: Option<Duration>,
}

/// What is learned from a request's answer: its length for its tenant's share and, when the
/// gateway predicts, for the predictor.
pub struct Learning {
    /// Who learns the answer's length and what was predicted of it, when the gateway predicts.
    pub predictor: Option<(Arc<Forecaster>, Forecast)>,
    /// Who learns its service time.
    pub admission: Arc<RequestQueue>,
    /// The answer's tally (streamed or not, as the request asked).
    pub tally: Tally,
    /// When it was admitted (its service starts).
    pub admitted: Instant,
    /// When its answer's first byte came (set on the way).
    pub first_byte: Option<Instant>,
}

/// A streamed answer's tokens are charged to its tenant at the first and then every this many as
/// they pass (VTC counts service as it is given: charged only at the end, a tenant's answers in
/// flight would look like service not yet received, and one cut short would never be charged).
const CHARGE_STEP: u32 = 16;

/// One admitted request, until its answer ends.
pub struct Life {
    slot: Option<Slot>,
    timing: Option<Timing>,
    learning: Option<Learning>,
    first: bool,
    /// Output tokens its tenant has been charged for so far (a stream's, as they pass).
    charged: u32,
}

impl Life {
    /// A request admitted to `slot`, timed by `timing`, learned from when `learning`.
    pub fn new(slot: Slot, timing: Timing, learning: Option<Learning>) -> Life {
        Life {
            slot: Some(slot),
            timing: Some(timing),
            learning,
            first: false,
            charged: 0,
        }
    }

    /// The upstream the core admitted it to.
    pub fn upstream(&self) -> Option<usize> {
        self.slot.as_ref().map(Slot::upstream)
    }

    /// The number to send it with, where its upstream orders its own queue by one.
    pub fn engine_priority(&self) -> Option<i64> {
        self.slot.as_ref().and_then(Slot::engine_priority)
    }

    /// Its upstream refused the number (see [`Slot::refuses_numbers`]).
    pub fn refuses_numbers(&self) -> bool {
        self.slot.as_ref().is_some_and(Slot::refuses_numbers)
    }

    /// `future` (sending the request to its upstream), unless the core takes the request off
    /// that engine first: `Err` says how.
    pub async fn unless_taken<F: Future>(&mut self, future: F) -> Result<F::Output, Taken> {
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            if let Some(slot) = &mut self.slot
                && let Poll::Ready(Some(taken)) = slot.poll_taken(cx)
            {
                return Poll::Ready(Err(taken));
            }
            future.as_mut().poll(cx).map(Ok)
        })
        .await
    }

    /// The core admitted it again, to `upstream` (taken back from a silent engine).
    pub fn moved(&mut self, upstream: usize) {
        if let Some(slot) = &mut self.slot {
            slot.moved(upstream);
        }
        // Its service there starts now.
        if let Some(l) = &mut self.learning {
            l.admitted = Instant::now();
        }
    }

    /// The engine answered with `status`: an error is no answer to learn a length from.
    pub fn answered_with(&mut self, status: hyper::StatusCode) {
        if !status.is_success() {
            self.learning = None;
        }
    }

    /// Evicted before its answer began (its slot goes with it).
    pub fn evicted(self) {
        if let Some(t) = &self.timing {
            t.metrics.evicted(t.band);
        }
        self.unanswered();
    }

    /// No answer came (the upstream failed, or it was evicted first): nothing to time or learn;
    /// its slot goes with it.
    pub fn unanswered(mut self) {
        self.timing = None;
        self.learning = None;
    }

    /// Charge the tenant for the stream's output tokens that passed and are not charged yet.
    fn charge_passed(&mut self) {
        let (Some(l), Some(slot)) = (&self.learning, &self.slot) else {
            return;
        };
        let passed = l.tally.text_events();
        if passed > self.charged {
            slot.charge(passed);
            if let Some(t) = &self.timing {
                t.metrics.tenant_tokens(t.tenant, passed - self.charged);
            }
            self.charged = passed;
        }
    }

    /// The answer's last byte (once).
    fn last_byte(&mut self) {
        if let Some(t) = self.timing.take() {
            t.metrics.last_byte(t.band, t.arrival.elapsed());
        }
    }

    /// The answer ended, or its client left: learn from it if the tally says it is whole.
    fn learn(&mut self) {
        // What passed is charged even when the stream says nothing of the answer's length.
        self.charge_passed();
        let Some(l) = self.learning.take() else {
            return;
        };
        // A complete answer's first byte is its end's: only a stream's times its prefill.
        let first_byte = l
            .first_byte
            .filter(|_| l.tally.streamed())
            .map(|f| f - l.admitted);
        let Some(counted) = l.tally.finish() else {
            return;
        };
        if let Some(slot) = &self.slot {
            if let Some(p) = counted.prompt_tokens {
                slot.prompt(p);
            }
            slot.charge(counted.output_tokens);
            let service_s = l.admitted.elapsed().as_secs_f64();
            l.admission
                .answered(slot.upstream(), counted.output_tokens, service_s);
        }
        if let Some(t) = &self.timing {
            // Those charged as they passed are counted already.
            let more = counted.output_tokens.saturating_sub(self.charged);
            t.metrics.tenant_tokens(t.tenant, more);
        }
        if let Some((forecaster, forecast)) = l.predictor {
            l.admission.served(xsched_llm_core::service::Served {
                prompt_tokens: counted.prompt_tokens.unwrap_or(forecast.input),
                output_tokens: counted.output_tokens,
                total_s: l.admitted.elapsed().as_secs_f64(),
                first_token_s: first_byte.map(|d| d.as_secs_f64()),
            });
            // Learning takes the predictor's lock, which a prediction holds for its scan: off
            // the runtime's threads.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(move || forecaster.learn(forecast, counted))),
                Err(_) => forecaster.learn(forecast, counted),
            }
        }
    }
}

impl AnswerWatch for Life {
    fn passed(&mut self, data: &[u8], at: Instant) {
        if !self.first {
            self.first = true;
            if let Some(t) = &self.timing {
                t.metrics
                    .first_byte(t.band, t.arrival.elapsed(), t.ttft_slo);
            }
            if let Some(slot) = &self.slot {
                slot.answering();
            }
        }
        let Some(l) = &mut self.learning else {
            return;
        };
        l.first_byte.get_or_insert(at);
        l.tally.feed(data);
        let passed = l.tally.text_events();
        // The first token too: the core holds sheddable requests back from an engine while a
        // higher class's request there waits for its first.
        if passed >= self.charged.saturating_add(CHARGE_STEP) || (self.charged == 0 && passed > 0) {
            self.charge_passed();
        }
    }

    fn stop(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(slot) = &mut self.slot else {
            return false;
        };
        loop {
            match slot.poll_taken(cx) {
                Poll::Ready(Some(Taken::Displaced)) => return true,
                // Taken back as its answer began: the answer goes on here; a new admission,
                // should one come, finds nobody waiting and is freed at once.
                Poll::Ready(Some(Taken::Requeued(_))) => continue,
                Poll::Ready(None) | Poll::Pending => return false,
            }
        }
    }

    fn waits_its_turn(&self, silence: Duration) -> bool {
        self.slot
            .as_ref()
            .is_some_and(|s| s.waits_its_turn(silence))
    }

    fn ended(mut self, how: Ended) {
        match how {
            Ended::Whole => self.learn(),
            Ended::Failed | Ended::Silent | Ended::Stopped => {
                if how == Ended::Stopped
                    && let Some(t) = &self.timing
                {
                    t.metrics.evicted(t.band);
                }
                self.charge_passed();
                self.learning = None;
            }
        }
        self.last_byte();
        // Dropped here: the slot admits the next request and frees its tenant's place.
    }
}

impl Drop for Life {
    /// The client left before the answer ended (or a path above ended it): what passed is
    /// charged, what the tally saw decides whether it is learned, and the slot is freed.
    fn drop(&mut self) {
        self.learn();
        self.last_byte();
    }
}
