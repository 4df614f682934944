//! The CPU device: worker threads, one bounded hardware FIFO, and per-queue gates.
//!
//! One mutex guards the device state (FIFO, per-queue gates, the running command); it is held
//! only to pick work and record its end, never while a tile runs. Workers sleep on a condition
//! variable when there is nothing to run.

mod lifecycle;
mod queue;
mod state;
mod worker;

pub use lifecycle::CpuDevice;
pub use queue::CpuQueue;
pub use state::DEFAULT_FIFO_CAPACITY;
