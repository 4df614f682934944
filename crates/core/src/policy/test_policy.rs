//! A policy that exists only in the test suite, to show what adding one takes: this file and
//! one row of the table in `mod.rs`. It runs the ready queue with the lowest id on each device.

use super::contract::{Policy, PolicyEntry, Scope, serve_lowest_rank};
use crate::ids::DeviceId;
use crate::time::Nanos;
use crate::view::QueueView;

pub(super) const ENTRIES: &[PolicyEntry] = &[PolicyEntry {
    name: "test-lowest-id",
    argument: None,
    build: |_| Ok(Box::new(LowestId::default())),
}];

/// Runs the ready queue with the lowest id on each device.
#[derive(Default)]
pub struct LowestId {
    scratch: Vec<(DeviceId, u32)>,
}

impl Policy for LowestId {
    fn name(&self) -> &'static str {
        "test-lowest-id"
    }

    fn schedule(&mut self, _now: Nanos, queues: &[QueueView], run: &mut [bool]) {
        serve_lowest_rank(queues, run, Scope::PerDevice, &mut self.scratch, |q| q.id.0);
    }
}
