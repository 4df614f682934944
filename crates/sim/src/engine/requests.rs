//! The workloads' requests: when each arrives (open loop, closed loop or paced), its stages
//! submitted as commands to their queues, and what a finished request records.

use super::{Ev, Sim, StageEnd};
use crate::spec::Arrival;
use xsched_core::{CommandMeta, Nanos, QueueEvent, QueueId};

impl Sim {
    pub(super) fn arrival(&mut self, w: usize) {
        let now = self.now;
        self.submit_stage(w, 0, now);
        let next = match self.spec.workloads[w].arrival {
            Arrival::Poisson { rate_per_s } => {
                let mean = Nanos::from_us_f64(1e6 / rate_per_s);
                Some(now + self.rng_of(w).exponential(mean))
            }
            Arrival::Uniform { rate_per_s } => Some(now + Nanos::from_us_f64(1e6 / rate_per_s)),
            Arrival::Closed { .. } | Arrival::Paced { .. } => None,
        };
        if let Some(t) = next.filter(|t| *t < self.spec.duration) {
            self.push(t, Ev::Arrival(w as u32));
        }
    }

    fn submit_stage(&mut self, w: usize, stage: usize, arrival: Nanos) {
        let spec = &self.spec.workloads[w];
        let st = spec.stages[stage];
        let idempotent = spec.idempotent;
        let q = st.queue;
        let mut last = None;
        let mut became_ready = false;
        for _ in 0..st.commands {
            let work = self.rng_of(w).between(st.cmd_min, st.cmd_max);
            let xq = &mut self.xqs[q];
            let meta = CommandMeta {
                estimate: if xq.declared { work } else { Nanos::ZERO },
                idempotent,
                ..CommandMeta::default()
            };
            let (id, was_idle) = xq.m.submit(meta);
            xq.durations.push_back((work, idempotent));
            became_ready |= was_idle;
            last = Some(id);
        }
        let Some(last) = last else {
            return; // unreachable: stages were checked non-empty in `Sim::new`
        };
        self.xqs[q].stage_ends.push_back(StageEnd {
            last,
            workload: w as u32,
            stage: stage as u32,
            arrival,
        });
        if became_ready {
            self.notify(q, QueueEvent::Ready(QueueId(q as u32)));
        }
        self.kick(q);
    }

    pub(super) fn stage_done(&mut self, w: usize, stage: usize, arrival: Nanos) {
        let spec = &self.spec.workloads[w];
        if stage + 1 < spec.stages.len() {
            self.submit_stage(w, stage + 1, arrival);
            return;
        }
        let deadline = spec.deadline;
        let arrival_kind = spec.arrival;
        let latency = self.now - arrival;
        if arrival >= self.spec.warmup {
            let now = self.now;
            let m = &mut self.metrics[w];
            m.record(latency);
            m.completed_at(now);
            m.completed += 1;
            if deadline.is_some_and(|d| latency <= d) {
                m.on_time += 1;
            }
        }
        match arrival_kind {
            Arrival::Closed { think } if think == Nanos::ZERO => {
                // Back to back: the application submits the next request before it could look
                // idle to the scheduler.
                let now = self.now;
                self.submit_stage(w, 0, now);
            }
            Arrival::Closed { think } => {
                let t = self.now + think;
                self.push(t, Ev::Arrival(w as u32));
            }
            Arrival::Paced { rate_per_s } => {
                let t = next_tick(self.now, arrival, Nanos::from_us_f64(1e6 / rate_per_s));
                if t < self.spec.duration {
                    self.push(t, Ev::Arrival(w as u32));
                }
            }
            Arrival::Poisson { .. } | Arrival::Uniform { .. } => {}
        }
    }
}

/// The first tick of a `period` clock (phase set by the tick `last` a request started at)
/// that is not before `now`.
fn next_tick(now: Nanos, last: Nanos, period: Nanos) -> Nanos {
    let period = period.0.max(1);
    let behind = now.0.saturating_sub(last.0);
    Nanos(
        behind
            .div_ceil(period)
            .max(1)
            .saturating_mul(period)
            .saturating_add(last.0),
    )
}
