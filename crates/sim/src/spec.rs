//! What a simulation run is made of: devices, queues, workloads, an optional policy and an
//! optional preemption probe. Scenarios build these; the engine runs them.

use crate::device::Arbitration;
use crate::profile::Profile;
use xsched_core::{LaunchConfig, Level, Nanos, PolicySpec, QueueHints};

/// A device and the costs of driving it.
#[derive(Debug, Clone)]
pub struct DeviceSpec {
    /// Name for reports.
    pub name: String,
    /// Native arbitration between hardware queues.
    pub arbitration: Arbitration,
    /// CPU cost of one launch.
    pub launch: Nanos,
    /// Extra CPU cost per command through an XQueue.
    pub intercept: Nanos,
    /// From a sync point completing to the launcher observing it.
    pub sync: Nanos,
    /// Level-2 deactivate latency.
    pub deactivate: Nanos,
    /// Level-3 interrupt latency.
    pub interrupt: Nanos,
    /// Level-3 restore latency.
    pub restore: Nanos,
    /// Highest level the device supports.
    pub max_level: Level,
    /// Every XQueue of the device launches through one dispatcher thread, one launch at a time
    /// (a central kernel dispatcher such as Paella's), instead of a launcher per queue.
    pub shared_launcher: bool,
}

impl DeviceSpec {
    /// The device of a profile.
    pub fn from_profile(p: &Profile) -> DeviceSpec {
        DeviceSpec {
            name: p.key.to_string(),
            arbitration: p.arbitration.value,
            launch: p.launch.value,
            intercept: p.intercept.value,
            sync: p.sync.value,
            deactivate: p.deactivate.value,
            interrupt: p.interrupt.value,
            restore: p.restore.value,
            max_level: p.max_level.value,
            shared_launcher: false,
        }
    }
}

/// How a queue reaches the hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    /// Without xsched: every command goes to the hardware at once, nobody can suspend it.
    Native,
    /// Through an XQueue with progressive launching at a preemption level.
    XQueue {
        /// Launch config.
        config: LaunchConfig,
        /// Preemption level (must be supported by the device).
        level: Level,
    },
}

/// One queue (one process's command stream on one device).
#[derive(Debug, Clone)]
pub struct QueueSpec {
    /// Name for reports.
    pub name: String,
    /// Index into the run's devices.
    pub device: usize,
    /// Native or through xsched.
    pub mode: QueueMode,
    /// Hints for the policy.
    pub hints: QueueHints,
    /// Commands declare their duration (else the XQueue measures it).
    pub declared_estimates: bool,
}

/// When requests start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Open loop, exponential inter-arrival times.
    Poisson {
        /// Requests per second.
        rate_per_s: f64,
    },
    /// Open loop, fixed inter-arrival time (also periodic tasks).
    Uniform {
        /// Requests per second.
        rate_per_s: f64,
    },
    /// Closed loop: the next request starts `think` after the previous one completes.
    Closed {
        /// Think time.
        think: Nanos,
    },
    /// A frame source (a camera): a request at each tick of the rate, one at a time. A
    /// request still running at the next tick makes its successor start at the first tick
    /// after it finished; the ticks in between are dropped frames, as a video pipeline that
    /// always processes the newest frame drops them.
    Paced {
        /// Ticks per second.
        rate_per_s: f64,
    },
}

/// One stage of a request: commands on one queue.
#[derive(Debug, Clone, Copy)]
pub struct StageSpec {
    /// Index into the run's queues.
    pub queue: usize,
    /// Commands in the stage.
    pub commands: u32,
    /// Shortest command.
    pub cmd_min: Nanos,
    /// Longest command (uniform in between).
    pub cmd_max: Nanos,
}

/// A stream of requests, each a pipeline of stages.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// Name for reports.
    pub name: String,
    /// Stages, in order.
    pub stages: Vec<StageSpec>,
    /// Arrival process.
    pub arrival: Arrival,
    /// Requests finishing within this latency count as on time.
    pub deadline: Option<Nanos>,
    /// Commands may be restarted by a Level-3 interrupt.
    pub idempotent: bool,
}

/// Measures preemption latency: at random moments suspend a queue and time until the device
/// no longer runs anything of it.
#[derive(Debug, Clone, Copy)]
pub struct ProbeSpec {
    /// Index into the run's queues.
    pub queue: usize,
    /// How many measurements.
    pub count: u32,
    /// How long the queue stays suspended after each measurement.
    pub hold: Nanos,
    /// Random gap before the next suspend, uniform in `[0, gap_max]`, after the queue resumed
    /// and refilled.
    pub gap_max: Nanos,
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct SimSpec {
    /// RNG seed.
    pub seed: u64,
    /// Stop time; open-loop arrivals stop here too.
    pub duration: Nanos,
    /// Requests arriving (and work completing) before this are not measured.
    pub warmup: Nanos,
    /// Devices.
    pub devices: Vec<DeviceSpec>,
    /// Queues.
    pub queues: Vec<QueueSpec>,
    /// Workloads.
    pub workloads: Vec<WorkloadSpec>,
    /// Policy of the scheduler for XQueue-mode queues (none: nobody suspends anything).
    pub policy: Option<PolicySpec>,
    /// From an event reaching the scheduler to its operation reaching the queue.
    pub sched_latency: Nanos,
    /// Optional preemption-latency probe (the run ends when it has its count).
    pub probe: Option<ProbeSpec>,
    /// Each workload draws its arrivals and command lengths from a random stream of its own
    /// (seeded from `seed` and its index), so what one workload does never changes another's
    /// requests: a comparison of modes then sees the same requests in each (common random
    /// numbers). Otherwise all draw from one stream in event order.
    pub own_streams: bool,
}
