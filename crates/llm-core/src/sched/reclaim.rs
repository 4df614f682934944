//! An engine that stops answering ([`Input::Responsive`](super::Input::Responsive)): it is sent
//! nothing, and the requests there whose answer has not begun are taken back
//! ([`EvictReason::Unresponsive`](super::EvictReason::Unresponsive)). Nothing of theirs reached
//! a client, so placing them on an engine that answers sends nothing twice; a hung engine then
//! costs them the time to notice it, not the driver's first-byte timeout. With no engine
//! answering, they and every request waiting are shed (their clients told to retry), and so is
//! each arrival until one answers. What has begun answering is left to finish or fail there.
//!
//! This part picks whom those rules touch; the book moves them and the round places them again.

use super::engines::EngineView;
use crate::job::{Job, Place};
use std::collections::BTreeMap;

/// The requests on `engine` to take back when it stops answering: admitted (or preempted
/// there), no token yet, no answer begun.
pub(super) fn to_take_back(engine: &EngineView, jobs: &BTreeMap<u64, Job>) -> Vec<u64> {
    (engine.admitted.iter().copied())
        .filter(|id| {
            jobs.get(id).is_some_and(|j| {
                matches!(j.place, Place::Admitted | Place::Preempted)
                    && j.generated == 0
                    && !j.answering
            })
        })
        .collect()
}

/// Every request of `jobs` waiting: what is shed when no engine answers.
pub(super) fn waiting(jobs: &BTreeMap<u64, Job>) -> Vec<u64> {
    (jobs.iter())
        .filter(|(_, j)| j.place == Place::Waiting)
        .map(|(&id, _)| id)
        .collect()
}

/// Whether none of `engines` answers: every arrival is shed then.
pub(super) fn none_responsive(engines: &[EngineView]) -> bool {
    !engines.iter().any(|e| e.responsive)
}
