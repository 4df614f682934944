//! FCFS: never suspend anything, so the hardware's own order decides. This emulates "no
//! scheduler" while keeping progressive launching, which is how its overhead is measured.

use super::contract::{Policy, PolicyEntry};
use crate::view::QueueView;
use crate::time::Nanos;

pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "fcfs",
    argument: None,
    build: |_| Ok(Box::new(Fcfs)),
}];

/// The do-nothing policy.
#[derive(Debug, Default)]
pub struct Fcfs;

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }

    fn schedule(&mut self, _now: Nanos, _queues: &[QueueView], _run: &mut [bool]) {}
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{decide, view};
    use super::*;

    #[test]
    fn runs_everything() {
        let qs = [view(0, 0, 5, true), view(1, 0, 0, true)];
        assert_eq!(decide(&mut Fcfs, Nanos::ZERO, &qs), vec![true, true]);
    }
}
