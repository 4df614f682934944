//! The runtime: creates XQueues and, in `local` mode, owns the in-process scheduler thread.
//!
//! No global state: a program may hold several runtimes (tests do); the C API and the shims
//! each keep the one they create.

use crate::agent;
use crate::error::RuntimeError;
use crate::hwqueue::HwQueue;
use crate::options::{QueueOptions, RuntimeConfig, WhoSchedules};
use crate::scheduler::SchedulerThread;
use crate::xqueue::XQueue;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use xsched_core::{DeviceId, Nanos, PolicySpec, QueueHints, QueueId, QueueView};

/// Distinct hint sets remembered for policy checks (enough for any real mix of queues).
const REMEMBERED_HINTS: usize = 64;

/// Creates XQueues and schedules them.
pub struct Runtime {
    config: RuntimeConfig,
    local: Option<SchedulerThread>,
    next_queue: AtomicU32,
    /// The distinct hints of the queues created so far, for the local policy's check.
    hints_seen: Mutex<Vec<QueueHints>>,
}

impl Runtime {
    /// A runtime with `config`. `local` starts the scheduler thread with the configured policy;
    /// `app` starts none; `global` starts the client agent, which reports to the daemon at
    /// `config.socket` (default: [`xsched_proto::default_socket_path`]). If the daemon is absent
    /// or goes away, queues run unscheduled (logged once) until it is back.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let local = match config.scheduler {
            WhoSchedules::App => None,
            WhoSchedules::Local => Some(SchedulerThread::start(config.policy.build())?),
            WhoSchedules::Global => {
                let socket = config
                    .socket
                    .clone()
                    .unwrap_or_else(xsched_proto::default_socket_path);
                Some(agent::start(socket, config.daemon_uid)?)
            }
        };
        Ok(Runtime {
            config,
            local,
            next_queue: AtomicU32::new(0),
            hints_seen: Mutex::new(Vec::new()),
        })
    }

    /// A runtime configured from `XSCHED_SCHEDULER`, `XSCHED_POLICY`, `XSCHED_SOCKET` and
    /// `XSCHED_DAEMON_UID`.
    pub fn from_env() -> Result<Runtime, RuntimeError> {
        Runtime::new(RuntimeConfig::from_env()?)
    }

    /// The configuration in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Put an XQueue in front of `hw`. Fails if the level is beyond the backend's capabilities,
    /// or if the local policy cannot work with this queue and those created before it (for
    /// `slo-aware`: create the queue with an SLO first).
    pub fn create_queue<H: HwQueue>(
        &self,
        hw: Arc<H>,
        options: QueueOptions,
    ) -> Result<XQueue<H>, RuntimeError> {
        let scheduler = if options.scheduled {
            self.local.as_ref()
        } else {
            None
        };
        if scheduler.is_some() && self.config.scheduler == WhoSchedules::Local {
            self.check_policy(&self.config.policy, Some(options.hints))?;
        }
        let id = QueueId(self.next_queue.fetch_add(1, Ordering::Relaxed));
        XQueue::start(id, hw, options, scheduler)
    }

    /// Whether `policy` can work with the queues created so far (and `new`, which is then
    /// remembered).
    fn check_policy(
        &self,
        policy: &PolicySpec,
        new: Option<QueueHints>,
    ) -> Result<(), RuntimeError> {
        let mut seen = self
            .hints_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let added = new.filter(|h| !seen.contains(h) && seen.len() < REMEMBERED_HINTS);
        if let Some(h) = added {
            seen.push(h);
        }
        let views: Vec<QueueView> = seen
            .iter()
            .enumerate()
            .map(|(i, &hints)| QueueView {
                id: QueueId(i as u32),
                device: DeviceId(0),
                hints,
                ready: false,
                ready_since: Nanos::ZERO,
                service: Nanos::ZERO,
            })
            .collect();
        let result = policy.build().check(&views);
        if result.is_err()
            && let Some(h) = added
        {
            // A refused queue does not count as created.
            seen.retain(|s| *s != h);
        }
        result.map_err(|source| RuntimeError::Policy {
            policy: policy.clone(),
            source,
        })
    }

    /// Switch the scheduler's policy at run time (in `global` mode: the daemon's).
    pub fn set_policy(&mut self, policy: &PolicySpec) -> Result<(), RuntimeError> {
        match &self.local {
            Some(local) if self.config.scheduler == WhoSchedules::Local => {
                self.check_policy(policy, None)?;
                local.set_policy(policy);
            }
            Some(local) => local.set_policy(policy),
            None => {}
        }
        self.config.policy = policy.clone();
        Ok(())
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .finish()
    }
}
