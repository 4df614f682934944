//! A request as it arrives, made into the job the scheduler keeps of it: its predicted lengths
//! capped by the bound it asked for, its sizes in the policy's unit, and its guards (the aging
//! guard, or the order's own, and its TTFT deadline's). A function of the arrival, the policy
//! and the service model alone, so it reads nothing else of the scheduler.

use super::{AGING_FACTOR, Arrival, earliest};
use crate::job::{Job, Place};
use crate::order;
use crate::policy::{Order, RequestPolicySpec, Size};
use crate::predict::{capped, prior};
use crate::service::ServiceModel;

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
