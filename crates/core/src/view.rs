//! What a policy sees of one queue: its own file so that policies and the scheduler that drives
//! them both read it without reading each other.

use crate::hint::QueueHints;
use crate::ids::{DeviceId, QueueId};
use crate::time::Nanos;

/// What a policy sees of one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueView {
    /// The queue.
    pub id: QueueId,
    /// Its device.
    pub device: DeviceId,
    /// Its hints.
    pub hints: QueueHints,
    /// Whether it has work.
    pub ready: bool,
    /// When it last became ready (meaningful while `ready`).
    pub ready_since: Nanos,
    /// Time spent ready and not suspended since it registered, up to the current decision:
    /// the device time it was allowed (queues the policy lets run together each count it all).
    pub service: Nanos,
}
