//! What a request that asked for a slot is told besides its slot: why it was refused, or that
//! the core took it off its engine.

use tokio::sync::oneshot;
use xsched_llm_core::ShedReason;

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
    pub(super) fn of(reason: ShedReason, class: i32, waiting: usize) -> RequestRefused {
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

/// What the core did to an admitted request.
#[derive(Debug)]
pub enum Taken {
    /// Evicted for a higher class: its answer is cut (its client told to retry).
    Displaced,
    /// Taken back from an engine that stopped answering before its answer began: its next
    /// admission (the upstream) or refusal comes here.
    Requeued(oneshot::Receiver<Result<usize, RequestRefused>>),
}
