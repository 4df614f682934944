//! A request as it arrives, made into the job the scheduler keeps of it: its predicted lengths
//! capped by the bound it asked for, its sizes in the policy's unit, and its guards (the aging
//! guard, or the order's own, and its TTFT deadline's), its number for an engine that orders,
//! and whether the rules shed it (or a request it displaces) when it has to wait. Functions of
//! what they are given, so each reads nothing else of the scheduler.

use super::book::Book;
use super::reclaim;
use super::{Arrival, Config, EngineOrder, ShedReason, engine_order};
use crate::job::{Job, Place};
use crate::order;
use crate::policy::{Order, RequestPolicySpec, Size};
use crate::predict::{capped, prior};
use crate::service::ServiceModel;

/// The aging guard: a request still waiting this many times its predicted time alone on an
/// engine after it arrived goes before every request that has not aged.
pub const AGING_FACTOR: f64 = 100.0;

/// The job for arrival `a` at `now`, the `seq`-th arrival, under `spec`.
pub(super) fn job_of(
    a: Arrival,
    now: f64,
    seq: u64,
    spec: RequestPolicySpec,
    service: &ServiceModel,
) -> Job {
    let lengths = capped(a.lengths.unwrap_or_else(prior), a.max_tokens);
    let first_mean = lengths.mean();
    let unit = match spec.order {
        Order::Gittins(Size::Time) => Size::Time,
        _ => Size::Cost,
    };
    let mut job = Job {
        seq,
        arrival: now,
        input: a.input_tokens,
        priority: a.priority,
        tenant: a.tenant,
        sizes: lengths.clone(),
        lengths,
        rates: service.linear_rates(),
        first_mean,
        generated: 0,
        engine: None,
        place: Place::Waiting,
        aged_at: None,
        deadline_at: None,
        routed_cost: 0.0,
        boosted_at: None,
        prefix: a.prefix,
        reports_first_token: a.reports_first_token,
        engines: a.engines,
        admitted_seq: 0,
        answering: false,
        engine_key: now,
    };
    job.sizes = job.sizes_for(spec.order);
    job.routed_cost = job.size(unit, first_mean.round().max(1.0));
    let guard = if spec.aging {
        service
            .solo_seconds(job.input, first_mean.round().max(1.0) as u32)
            .map(|alone| now + AGING_FACTOR * alone)
            .filter(|t| t.is_finite())
    } else {
        order::own_guard(spec.order, now, &job)
    };
    // Its deadline's guard: the last moment it can start and still meet its TTFT SLO.
    job.deadline_at = a
        .ttft_slo
        .and_then(|slo| Some(now + slo - service.slo_lead(job.input, slo)?));
    job.aged_at = earliest(guard, job.deadline_at);
    job
}

/// The reference request's rank for an engine that orders, and the rates it was ranked with
/// (the reference's rank changes only with the rates a time order ranks by).
pub(super) type ReferenceRank = Option<(Option<(f64, f64)>, f64)>;

/// With an engine that orders its own queue (`o`), `job`'s number there, arriving at `now`:
/// its virtual deadline (`engine_order.rs`), its tenant `lead` ahead of the least served.
pub(super) fn engine_key(
    o: &EngineOrder,
    now: f64,
    job: &Job,
    lead: f64,
    reference: &mut ReferenceRank,
    spec: RequestPolicySpec,
    service: &ServiceModel,
) -> f64 {
    let rank = |j: &Job| order::rank(spec.order, j, service, spec.preemptive).major;
    let r = match *reference {
        Some((rates, r)) if rates == job.rates => r,
        _ => rank(&job.reference(spec.order)),
    };
    *reference = Some((job.rates, r));
    let place = engine_order::place(rank(job), r);
    engine_order::virtual_deadline(o, now, place, lead, job.deadline_at)
}

/// Request `id` of class `priority` arrived and waits (in `engine`'s queue, placed on
/// arrival): the request to shed, it or the sheddable request it displaces, if the rules say
/// so, and why.
pub(super) fn to_shed(
    book: &Book,
    config: &Config,
    id: u64,
    priority: i32,
    engine: Option<usize>,
) -> Option<(u64, ShedReason)> {
    // Held only while another's prompt is prefilled, with a slot free: not saturated.
    // With no engine answering, nothing is held for one that may never answer.
    let lanes = book.waiting.lanes(engine);
    let sheddable_saturated = priority < 0
        && lanes.sheddable() > config.fairness.sheddable_waiting
        && !book.slot_free(engine);
    if reclaim::none_responsive(&book.engines) {
        Some((id, ShedReason::NoEngine))
    } else if sheddable_saturated {
        Some((id, ShedReason::Saturated))
    } else if book.waiting.len() > config.max_waiting {
        // A higher class displaces the newest sheddable request of the lowest class.
        Some(match lanes.displaceable(priority) {
            Some(other) => (other, ShedReason::Displaced),
            None => (id, ShedReason::QueueFull),
        })
    } else {
        None
    }
}

/// The earlier of two guard times, either absent.
pub(super) fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
