//! The XQueue launch state machine: progressive launching and per-level suspend/resume.
//!
//! This is XSched's central mechanism with no I/O in it. Commands are submitted into a software
//! queue and moved to the hardware queue a few at a time: at most `threshold` in flight, with a
//! synchronization point every `batch` commands. A driver (launcher thread, simulator) asks
//! [`LaunchMachine::poll_launch`] what to launch next and reports observed completions with
//! [`LaunchMachine::on_synced`].
//!
//! The machine is the only place that maps a preemption level to what the hardware must do:
//! [`suspend`](LaunchMachine::suspend), [`resume`](LaunchMachine::resume) and
//! [`close`](LaunchMachine::close) return a `#[must_use]` [`HwAction`] (deactivate, interrupt,
//! reactivate, restore, or nothing), and drivers execute exactly that. A resume undoes what the
//! suspend applied (the level cannot change while suspended); after `close` nothing suspends
//! the queue again, so a draining queue is never left held.
//!
//! Invariants (property-tested): every command completes exactly once and in submission order;
//! in-flight never exceeds the threshold unless the queue is protected; a suspended machine
//! launches nothing (unless it runs while deactivated, at Level 2 on hardware whose
//! deactivation only lowers its priority); resume loses nothing; whenever launching is blocked while commands are in
//! flight, a synchronization point is among them, so the driver always has something to wait
//! on.

use crate::command::CommandMeta;
use crate::config::LaunchConfig;
use crate::ids::CommandId;
use crate::level::Level;
use crate::time::Nanos;
use std::collections::VecDeque;

/// One command to hand to the hardware.
#[must_use = "a polled launch must be handed to the hardware"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Which command.
    pub cmd: CommandId,
    /// Its metadata.
    pub meta: CommandMeta,
    /// Record a synchronization point (an event) after it: the launcher will wait on it.
    pub sync: bool,
    /// The synchronization point is there only because nothing else was pending (the tail of
    /// a burst): a driver may skip observing it once a later command was launched, whose own
    /// point covers it (the last launched command always has one).
    pub tail: bool,
}

/// What the hardware must do besides launching (or no longer launching).
#[must_use = "the hardware half of a suspend, resume or close must be executed"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HwAction {
    /// Nothing (Level 1, or nothing changed).
    Nothing,
    /// Level 2 suspend: hold the queued hardware commands.
    Deactivate,
    /// Level 3 suspend: also stop the running command.
    Interrupt,
    /// Undo a deactivate: let the hardware start held commands again.
    Reactivate,
    /// Undo an interrupt: restore the interrupted command (or restart it if idempotent) and
    /// reactivate.
    Restore,
}

/// Commands newly known complete after a synchronization point was observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synced {
    /// First command completed by this observation.
    pub first: CommandId,
    /// Last command completed (inclusive); all in between completed too.
    pub last: CommandId,
    /// The queue now holds nothing: report it idle.
    pub now_idle: bool,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    cmd: CommandId,
    estimate: Nanos,
    launched_at: Nanos,
    sync: bool,
}

/// Under a time budget, this many commands may always be in flight (threshold permitting):
/// one running and one queued behind it, so the device never idles while the launcher waits
/// for a synchronization point. Level-1 preemption latency is then about `max(budget, T) + T`.
const MIN_IN_FLIGHT_UNDER_BUDGET: usize = 2;

/// The in-flight floor drops to one command once the running command is at least this many
/// times the measured launch gap (from a command's completion to the launch that refills the
/// queue): refilling only after it ends then idles the device for at most 1/20 (5 %) of its
/// time, while a second long command in flight would add a whole `T` to every Level-1 suspend
/// (latency `max(budget, T)` instead of `max(budget, T) + T`). Without a measured gap (the
/// simulator, a queue that never waited to refill) the floor stays two.
const ONE_IN_FLIGHT_AT_GAP_MULTIPLE: u64 = 20;

/// Weight of a new sample in the measured per-command duration (exponential average).
const EWMA_NEW_SAMPLE_PER_8: u64 = 2;

/// The exponential average of `old` with a new `sample`.
fn ewma(old: Nanos, sample: Nanos) -> Nanos {
    Nanos(
        old.0
            .saturating_mul(8 - EWMA_NEW_SAMPLE_PER_8)
            .saturating_add(sample.0.saturating_mul(EWMA_NEW_SAMPLE_PER_8))
            / 8,
    )
}

/// The launch state machine of one XQueue.
#[derive(Debug)]
pub struct LaunchMachine {
    config: LaunchConfig,
    level: Level,
    suspended: bool,
    /// A suspend at Level 2 keeps launching: the hardware's deactivation only lowers the
    /// queue's priority (a CPU device whose threads run on idle CPU), so a held queue may
    /// still use what the device has left over.
    runs_while_deactivated: bool,
    closed: bool,
    protected: bool,
    pending: VecDeque<(CommandId, CommandMeta)>,
    in_flight: VecDeque<InFlight>,
    next_id: u64,
    since_sync: u32,
    inflight_estimate: Nanos,
    measured: Option<Nanos>,
    last_observed: Nanos,
    launch_gap: Option<Nanos>,
}

impl LaunchMachine {
    /// A machine with the given (already validated) config and level.
    pub fn new(config: LaunchConfig, level: Level) -> LaunchMachine {
        LaunchMachine {
            config,
            level,
            suspended: false,
            runs_while_deactivated: false,
            closed: false,
            protected: false,
            pending: VecDeque::new(),
            in_flight: VecDeque::new(),
            next_id: 0,
            since_sync: 0,
            inflight_estimate: Nanos::ZERO,
            measured: None,
            last_observed: Nanos::ZERO,
            launch_gap: None,
        }
    }

    /// Enqueue a command. Returns its id and whether the queue was idle before (report Ready).
    pub fn submit(&mut self, meta: CommandMeta) -> (CommandId, bool) {
        let was_idle = self.is_idle();
        let cmd = CommandId(self.next_id);
        self.next_id += 1;
        self.pending.push_back((cmd, meta));
        (cmd, was_idle)
    }

    /// Whether [`poll_launch`](Self::poll_launch) would return a command now.
    pub fn can_launch(&self) -> bool {
        !self.stopped() && self.room_to_launch()
    }

    /// Suspended, and the suspend stops launching (see `runs_while_deactivated`).
    fn stopped(&self) -> bool {
        self.suspended && !(self.runs_while_deactivated && self.level == Level::Deactivate)
    }

    /// Keep launching while suspended at Level 2, for hardware whose deactivation only lowers
    /// the queue's priority: the queue then takes only what the device leaves idle.
    pub fn set_runs_while_deactivated(&mut self, on: bool) {
        self.runs_while_deactivated = on;
    }

    /// The launch conditions other than suspension: work pending, below threshold and budget.
    fn room_to_launch(&self) -> bool {
        !self.pending.is_empty()
            && (self.protected
                || (self.in_flight.len() as u64) < u64::from(self.config.threshold()))
            && self.budget().is_none_or(|budget| {
                self.in_flight.len() < self.floor() || self.inflight_estimate < budget
            })
    }

    /// How many commands may be in flight whatever the budget: two, or one while the running
    /// command is long against the measured launch gap (see [`ONE_IN_FLIGHT_AT_GAP_MULTIPLE`]).
    fn floor(&self) -> usize {
        match (self.launch_gap, self.in_flight.back()) {
            (Some(gap), Some(running))
                if running.estimate.0 >= gap.0.saturating_mul(ONE_IN_FLIGHT_AT_GAP_MULTIPLE) =>
            {
                1
            }
            _ => MIN_IN_FLIGHT_UNDER_BUDGET,
        }
    }

    /// Where a driver that can observe single completions should refill from: while an
    /// in-flight time budget blocks launching with work pending, the in-flight command whose
    /// completion frees half the budget. Observing it (with [`on_synced`](Self::on_synced))
    /// lets the next commands launch while the rest still run, instead of after the device
    /// drained to the synchronization point at the end.
    pub fn refill_point(&self) -> Option<CommandId> {
        let budget = self.budget()?;
        if self.stopped() || self.pending.is_empty() || self.room_to_launch() {
            return None;
        }
        let mut left = self.inflight_estimate;
        self.in_flight.iter().find_map(|f| {
            left = left.saturating_sub(f.estimate);
            (left.0.saturating_mul(2) <= budget.0).then_some(f.cmd)
        })
    }

    /// The driver measured a launch gap: the time from a command's completion to the launch
    /// that refilled the queue after it (a wake-up and a launch call on a real device).
    /// Averaged like command durations; it decides the in-flight floor under a budget.
    pub fn observe_launch_gap(&mut self, gap: Nanos) {
        self.launch_gap = Some(match self.launch_gap {
            None => gap,
            Some(old) => ewma(old, gap),
        });
    }

    /// The launch gap measured so far.
    pub fn launch_gap(&self) -> Option<Nanos> {
        self.launch_gap
    }

    /// The in-flight time budget in force. It bounds what a Level-1 suspend must drain; at
    /// Levels 2 and 3 the hardware holds or stops queued work, so it would only cost throughput;
    /// a protected queue is not the one that will be suspended.
    fn budget(&self) -> Option<Nanos> {
        self.config
            .inflight_budget()
            .filter(|_| self.level == Level::Block && !self.protected)
    }

    /// The next command to hand to the hardware, if launching is allowed now.
    #[must_use = "a polled launch must be handed to the hardware"]
    pub fn poll_launch(&mut self, now: Nanos) -> Option<Launch> {
        if !self.can_launch() {
            return None;
        }
        let (cmd, meta) = self.pending.pop_front()?;
        let estimate = self.estimate_of(&meta);
        self.inflight_estimate += estimate;
        self.since_sync += 1;
        self.in_flight.push_back(InFlight {
            cmd,
            estimate,
            launched_at: now,
            sync: false,
        });
        // A sync point every `batch` commands, at the tail of a burst, and wherever launching
        // will block next (suspension aside), so a blocked launcher always has a point to wait on.
        // Under a time budget, every *long* command (half the budget or more) is one too: the
        // launcher then refills as soon as the running one ends, while the next still runs, so
        // the hardware never idles waiting for the launcher.
        let long = self.budget().is_some_and(|budget| {
            estimate.0.saturating_mul(MIN_IN_FLIGHT_UNDER_BUDGET as u64) >= budget.0
        });
        let due = long || self.since_sync >= self.config.batch();
        let sync = due || !self.room_to_launch();
        let tail = sync && !due && self.pending.is_empty();
        if sync {
            self.since_sync = 0;
            if let Some(last) = self.in_flight.back_mut() {
                last.sync = true;
            }
        }
        Some(Launch {
            cmd,
            meta,
            sync,
            tail,
        })
    }

    /// The synchronization point at `cmd` was observed complete at `now`: it and every command
    /// before it are done. Returns `None` if nothing was in flight up to `cmd`.
    pub fn on_synced(&mut self, cmd: CommandId, now: Nanos) -> Option<Synced> {
        let first = self.in_flight.front()?.cmd;
        if first > cmd {
            return None;
        }
        let mut count = 0u64;
        let mut started = Nanos::MAX;
        let mut last = first;
        while let Some(f) = self.in_flight.front().copied() {
            if f.cmd > cmd {
                break;
            }
            self.in_flight.pop_front();
            self.inflight_estimate = self.inflight_estimate.saturating_sub(f.estimate);
            started = started.min(f.launched_at);
            last = f.cmd;
            count += 1;
        }
        self.learn(now, started, count);
        if self.in_flight.is_empty() {
            // Estimates may have drifted (measured values changed); start clean.
            self.inflight_estimate = Nanos::ZERO;
        }
        Some(Synced {
            first,
            last,
            now_idle: self.is_idle(),
        })
    }

    fn learn(&mut self, now: Nanos, started: Nanos, count: u64) {
        let since = started.max(self.last_observed);
        self.last_observed = now;
        if count == 0 || now <= since {
            return;
        }
        let sample = Nanos(now.saturating_sub(since).0 / count);
        self.measured = Some(match self.measured {
            None => sample,
            Some(old) => ewma(old, sample),
        });
    }

    fn estimate_of(&self, meta: &CommandMeta) -> Nanos {
        if meta.estimate > Nanos::ZERO {
            meta.estimate
        } else {
            self.measured.unwrap_or(Nanos::ZERO)
        }
    }

    /// Stop launching. Returns what the hardware must do at this queue's level (nothing if
    /// already suspended, or closed).
    pub fn suspend(&mut self) -> HwAction {
        if self.suspended || self.closed {
            return HwAction::Nothing;
        }
        self.suspended = true;
        match self.level {
            Level::Block => HwAction::Nothing,
            Level::Deactivate => HwAction::Deactivate,
            Level::Interrupt => HwAction::Interrupt,
        }
    }

    /// Launch again. Returns what the hardware must do to undo the suspend.
    pub fn resume(&mut self) -> HwAction {
        if !self.suspended {
            return HwAction::Nothing;
        }
        self.suspended = false;
        match self.level {
            Level::Block => HwAction::Nothing,
            Level::Deactivate => HwAction::Reactivate,
            Level::Interrupt => HwAction::Restore,
        }
    }

    /// The queue drains and closes: resume for good (returning what undoes a suspend) and
    /// refuse every later suspend.
    pub fn close(&mut self) -> HwAction {
        let undo = self.resume();
        self.closed = true;
        undo
    }

    /// Change the level. Only allowed while running (a suspended queue must resume first, so
    /// the hardware is never left deactivated by a level it no longer uses); returns false then.
    pub fn set_level(&mut self, level: Level) -> bool {
        if self.suspended {
            return false;
        }
        self.level = level;
        true
    }

    /// Protect the queue (the scheduler suspended others for it): launch without the threshold
    /// and the in-flight budget, which only exist so that a suspend bites quickly. Sync points
    /// every `batch` commands remain, for completion tracking. `false` restores the limits.
    pub fn set_protected(&mut self, protected: bool) {
        self.protected = protected;
    }

    /// Change the launch config; takes effect on the next launch.
    pub fn set_config(&mut self, config: LaunchConfig) {
        self.config = config;
    }

    /// Drop every command not yet launched; returns how many. In-flight ones still complete.
    pub fn cancel_pending(&mut self) -> usize {
        let n = self.pending.len();
        self.pending.clear();
        n
    }

    /// Nothing pending and nothing in flight.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.in_flight.is_empty()
    }

    /// Whether the machine is suspended.
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// The current level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The current launch config.
    pub fn config(&self) -> LaunchConfig {
        self.config
    }

    /// Commands in the hardware queue, not yet observed complete.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Commands not yet launched.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests;
