//! What a queue and a runtime are configured with, and their defaults.

use crate::error::RuntimeError;
use crate::mode::RolloutMode;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use xsched_core::{Hint, LaunchConfig, Level, Nanos, PolicySpec, QueueHints};

/// The default in-flight time budget of an XQueue (`XSCHED_INFLIGHT_US`).
///
/// With it, Level-1 preemption latency stays near `max(budget, T) + T` for long commands
/// instead of `threshold × T`; short commands still keep several in flight, so the device never
/// waits for the launcher. The default bounds Level-1 latency for long commands while short
/// ones lose no throughput (`xsched bench preempt` and `xsched bench overhead` measure both).
pub const DEFAULT_INFLIGHT_BUDGET: Nanos = Nanos::from_us(500);

/// Who schedules a process's XQueues (`XSCHED_SCHEDULER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhoSchedules {
    /// Nobody: the application calls suspend/resume itself.
    App,
    /// The in-process scheduler thread (default).
    Local,
    /// The cross-process daemon (`xsched serve`).
    Global,
}

impl WhoSchedules {
    /// The name used in `XSCHED_SCHEDULER`.
    pub fn name(self) -> &'static str {
        match self {
            WhoSchedules::App => "app",
            WhoSchedules::Local => "local",
            WhoSchedules::Global => "global",
        }
    }
}

/// Process-wide settings: who schedules and with which policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Scheduler mode; default [`WhoSchedules::Local`].
    pub scheduler: WhoSchedules,
    /// Policy of the local scheduler; default `hpf`.
    pub policy: PolicySpec,
    /// Daemon socket for [`WhoSchedules::Global`]; `None` means the default path.
    pub socket: Option<PathBuf>,
    /// A user besides root and this process's own whose daemon the agent obeys
    /// (`XSCHED_DAEMON_UID`: a daemon run by a dedicated account).
    pub daemon_uid: Option<u32>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            scheduler: WhoSchedules::Local,
            policy: PolicySpec::default(),
            socket: None,
            daemon_uid: None,
        }
    }
}

/// Per-queue settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Preemption level; `None` picks the highest the backend offers.
    pub level: Option<Level>,
    /// Progressive-launching config (default: threshold 16, batch 8, 500 µs in-flight budget).
    pub config: LaunchConfig,
    /// Hints in force from the start.
    pub hints: QueueHints,
    /// Register with the scheduler (default). `false` makes a queue nobody suspends.
    pub scheduled: bool,
    /// The most commands the queue holds submitted but not launched; a submit beyond it waits
    /// until a launch makes room (backpressure on a tenant that submits faster than it may
    /// run). `None` (the default): no bound.
    pub max_pending: Option<NonZeroUsize>,
    /// The rollout mode it was put in ([`RolloutMode::apply`](crate::RolloutMode::apply)), if any.
    pub mode: Option<RolloutMode>,
    /// Keep launching while suspended at Level 2 where the backend's deactivation only lowers
    /// the queue's priority ([`HwQueue::deactivation_only_lowers_priority`](crate::HwQueue)):
    /// a held queue then runs on what the device leaves idle (`XSCHED_CPU_HOLD=yield`).
    /// Default `false`: a held queue launches nothing (`stop`).
    pub yield_when_held: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            level: None,
            config: LaunchConfig::DEFAULT.with_inflight_budget(Some(DEFAULT_INFLIGHT_BUDGET)),
            hints: QueueHints::default(),
            scheduled: true,
            max_pending: None,
            mode: None,
            yield_when_held: false,
        }
    }
}

impl QueueOptions {
    /// The same options with one more hint (validated).
    pub fn with_hint(mut self, hint: Hint) -> Result<QueueOptions, RuntimeError> {
        self.hints.apply(hint)?;
        Ok(self)
    }

    /// The same options at `level`.
    pub fn with_level(self, level: Level) -> QueueOptions {
        QueueOptions {
            level: Some(level),
            ..self
        }
    }

    /// The same options with `config`.
    pub fn with_config(self, config: LaunchConfig) -> QueueOptions {
        QueueOptions { config, ..self }
    }

    /// The same options holding at most `max` commands unlaunched (see
    /// [`max_pending`](Self::max_pending)).
    pub fn with_max_pending(self, max: NonZeroUsize) -> QueueOptions {
        QueueOptions {
            max_pending: Some(max),
            ..self
        }
    }

    /// Unscheduled, unbounded: what an application gets without xsched (everything launched at
    /// once; nobody suspends it). For "native" baselines.
    pub fn native() -> QueueOptions {
        QueueOptions {
            level: Some(Level::Block),
            config: LaunchConfig::UNBOUNDED,
            hints: QueueHints::default(),
            scheduled: false,
            max_pending: None,
            mode: None,
            yield_when_held: false,
        }
    }
}

/// A mode's options live beside the options it sets.
impl RolloutMode {
    /// `options` in this mode (hints kept).
    pub fn apply(self, options: QueueOptions) -> QueueOptions {
        let options = QueueOptions {
            mode: Some(self),
            ..options
        };
        match self {
            RolloutMode::Observe => QueueOptions {
                level: Some(Level::Block),
                config: LaunchConfig::UNBOUNDED,
                ..options
            },
            RolloutMode::Cooperative => options.with_level(Level::Block),
            RolloutMode::Preemptive => QueueOptions {
                level: None,
                ..options
            },
        }
    }
}
