//! # xsched-bench
//!
//! Experiments on real threads and real kernels (the built-in CPU device), measured with the
//! monotonic clock. They produce the same [`Report`] as the simulator's scenarios, so the CLI
//! prints both alike. Wall-clock figures belong in the docs' benchmark record with their command
//! (`xsched demo`, `xsched bench NAME`); tests only check that the experiments run and are
//! well-formed, never tight timings.
//!
//! - [`catalog`]: what `xsched bench NAME` runs: each benchmark with its defaults, what
//!   `--samples` sets in it, and whether it needs the `xsched` binary, keeps a record or draws.
//! - [`adopt`]: the adoption path on the demo's conflict: natively, then observe, cooperative
//!   and preemptive mode, with every queue's accounting (and a record for `xsched report`).
//! - [`case_ai_pc`]: XSched's AI-PC case study (video blur beside speech jobs with a
//!   deadline) under FCFS, fixed priority and laxity, time scaled down tenfold.
//! - [`case_harvest`]: XSched's GPU-harvesting case study (a production service beside a
//!   training loop or long financial kernels) natively, under a fixed quota, a TGS-like rate
//!   and xsched's fixed priority and SLO-aware harvesting.
//! - [`case_two_model`]: XSched's two-model serving case study (a foreground and a background
//!   inference service) natively, with request priorities, xsched and kernel-by-kernel dispatch.
//! - [`fg_bg`]: a foreground request stream beside a saturating background: standalone vs
//!   native vs xsched at each level (the demo).
//! - [`preempt`]: preemption latency against command length, per level, beside the machine's
//!   raw thread wake-up round trip (the floor).
//! - [`overhead`]: per-command submit cost and throughput loss against direct launching.
//! - [`cpu_share`]: the scheduler's own CPU time, idle and at 10 k commands/s.
//! - [`multi_device`]: a pipeline across two devices under one policy per device vs one
//!   policy across both.
//! - [`harvest`]: Hummingbird's idle-time harvesting beside an HP service with gaps: the
//!   collector driven cooperatively, and the `slo-aware` policy in process and through the
//!   daemon with two processes (`harvest-daemon`).
//! - [`poisson`]: an open-loop service of seeded requests on a real queue (the case studies').
//! - [`two_process`]: the demo as two processes under a daemon (`xsched demo --processes`).
//! - [`roles`]: the worker processes' roles and how to start one (what the experiments that
//!   run workers import).
//! - [`workers`]: what each role runs: the dispatch to the bodies in their experiments
//!   (imported by nothing in this crate).
//! - [`switches`]: this process's context switches, for wake-ups per command.
//! - [`daemon_rtt`]: event → operation round trip through the daemon beside a raw socket
//!   ping-pong, and the daemon's CPU share at 10 k events/s.
//! - [`soak`]: client processes under a daemon that is killed, stopped and restarted while
//!   clients are killed too: every surviving client's commands run exactly once.
//!
//! # Errors
//!
//! Every fallible public function returns [`BenchError`] (the worker role parser
//! [`roles::Role::from_name`], a clap value parser, included).

pub mod adopt;
pub mod case_ai_pc;
pub mod case_harvest;
pub mod case_two_model;
pub mod catalog;
pub mod cpu_share;
pub mod daemon_rtt;
mod error;
pub mod fg_bg;
pub mod harvest;
pub mod multi_device;
pub mod overhead;
pub mod poisson;
pub mod preempt;
pub mod roles;
pub mod soak;
mod stats;
pub mod switches;
pub mod two_process;
pub mod workers;

pub use error::BenchError;
pub use xsched_report::{Check, Report};
