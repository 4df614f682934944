//! The request headers that name a class, a tenant or a deadline, the deadline's reading, and
//! the 400 a bad one gets.

use hyper::HeaderMap;

/// The header naming a request's class (llm-d's objective).
pub const OBJECTIVE_HEADER: &str = "x-llm-d-inference-objective";
/// The header with a request's integer priority (NVIDIA Dynamo's; higher wins).
pub const PRIORITY_HEADER: &str = "x-dynamo-request-priority";
/// The header naming a request's tenant (llm-d's fairness id).
pub const TENANT_HEADER: &str = "x-llm-d-inference-fairness-id";
/// The header with a request's TTFT deadline in milliseconds (llm-d's).
pub const SLO_TTFT_HEADER: &str = "x-llm-d-slo-ttft-ms";
/// The longest TTFT deadline accepted (an hour).
pub const MAX_SLO_MS: u64 = 3_600_000;

/// The TTFT deadline a request asks for, from its headers (`None`: none).
pub(crate) fn ttft_slo_of(headers: &HeaderMap) -> Result<Option<std::time::Duration>, BadClass> {
    let Some(v) = headers.get(SLO_TTFT_HEADER) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|ms| (1..=MAX_SLO_MS).contains(ms))
        .map(|ms| Some(std::time::Duration::from_millis(ms)))
        .ok_or_else(|| BadClass {
            header: SLO_TTFT_HEADER,
            reason: format!("expected whole milliseconds from 1 to {MAX_SLO_MS}"),
        })
}

/// Why a request's headers or body were refused: a 400 naming the header or field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{header}: {reason}")]
pub(crate) struct BadClass {
    /// The header (or body field).
    pub header: &'static str,
    /// What it must be.
    pub reason: String,
}
