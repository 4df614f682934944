//! Checking a spec's queues and workloads as a run is set up: each queue becomes a launch
//! machine on its device (registered with the scheduler when it is an XQueue), and each
//! workload's first arrival is scheduled.

use super::{Ev, ScenarioError, Sim, XQ};
use crate::spec::{Arrival, QueueMode};
use std::collections::VecDeque;
use xsched_core::{DeviceId, LaunchConfig, LaunchMachine, Level, Nanos, QueueId};

impl Sim {
    /// Check workload `wi` of the spec and schedule its first arrival.
    pub(super) fn add_workload(&mut self, wi: usize) -> Result<(), ScenarioError> {
        let w = &self.spec.workloads[wi];
        if w.stages.is_empty() || w.stages.iter().any(|s| s.commands == 0) {
            return Err(ScenarioError::Spec(format!(
                "workload `{}` needs at least one stage of at least one command",
                w.name
            )));
        }
        if let Arrival::Poisson { rate_per_s }
        | Arrival::Uniform { rate_per_s }
        | Arrival::Paced { rate_per_s } = w.arrival
            && !(rate_per_s.is_finite() && rate_per_s > 0.0)
        {
            return Err(ScenarioError::Spec(format!(
                "workload `{}`: rate {rate_per_s} per second is not a positive number",
                w.name
            )));
        }
        if let Some(s) = w.stages.iter().find(|s| s.queue >= self.xqs.len()) {
            return Err(ScenarioError::Spec(format!(
                "workload `{}` names queue {} of {}",
                w.name,
                s.queue,
                self.xqs.len()
            )));
        }
        // Open-loop streams start at staggered nanoseconds so ties never depend on order.
        let first = match w.arrival {
            Arrival::Closed { .. } => Nanos::ZERO,
            _ => Nanos(wi as u64),
        };
        self.push(first, Ev::Arrival(wi as u32));
        Ok(())
    }

    pub(super) fn add_queue(&mut self, qi: usize) -> Result<(), ScenarioError> {
        let q = &self.spec.queues[qi];
        let Some(dev) = self.spec.devices.get(q.device) else {
            return Err(ScenarioError::Spec(format!(
                "queue `{}` names device {} of {}",
                q.name,
                q.device,
                self.spec.devices.len()
            )));
        };
        let core_err = |source| ScenarioError::Core {
            queue: q.name.clone(),
            source,
        };
        let (config, level, scheduled, cost) = match q.mode {
            QueueMode::Native => (LaunchConfig::UNBOUNDED, Level::Block, false, dev.launch),
            QueueMode::XQueue { config, level } => {
                xsched_core::Capabilities {
                    max_level: dev.max_level,
                    native_arbitration: String::new(),
                    preemption_unit: String::new(),
                    keeps_state: false,
                    hardware_priority: false,
                }
                .check_level(level)
                .map_err(core_err)?;
                (
                    config,
                    level,
                    self.sched.is_some(),
                    dev.launch + dev.intercept,
                )
            }
        };
        if let Some(s) = self.sched.as_mut().filter(|_| scheduled) {
            s.register(
                Nanos::ZERO,
                QueueId(qi as u32),
                DeviceId(q.device as u16),
                q.hints,
                qi as u32,
            )
            .map_err(core_err)?;
        }
        let hwq = self.devices[q.device].add_queue();
        self.xqs.push(XQ {
            m: LaunchMachine::new(config, level),
            device: q.device,
            hwq,
            launch_cost: cost,
            sync_cost: dev.sync,
            scheduled,
            declared: q.declared_estimates,
            launching: false,
            durations: VecDeque::new(),
            stage_ends: VecDeque::new(),
            work_done: Nanos::ZERO,
        });
        Ok(())
    }
}
