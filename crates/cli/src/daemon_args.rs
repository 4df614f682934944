//! The arguments of the commands that advise or steer a running daemon (`policy`, `mode set`,
//! `hint`), and their hand-off to the daemon client in `daemon_cmds`.

use crate::common_args::{Socket, policy_help};
use crate::daemon_cmds;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use xsched_core::{Hint, Nanos, PolicySpec};

#[derive(Subcommand)]
pub(crate) enum ModeAction {
    /// Put a process's queues (or one of them) in a mode.
    Set {
        /// The process.
        #[arg(long)]
        pid: u32,
        /// One of its queues (default: all of them).
        #[arg(long)]
        queue: Option<u32>,
        /// observe, cooperative or preemptive.
        #[arg(value_parser = mode_name)]
        mode: xsched_runtime::RolloutMode,
        #[command(flatten)]
        socket: Socket,
    },
}

/// A rollout mode, checked while parsing.
fn mode_name(s: &str) -> Result<xsched_runtime::RolloutMode, String> {
    s.parse::<xsched_runtime::RolloutMode>()
        .map_err(|e| format!("unknown mode `{s}`: {e}"))
}

#[derive(Subcommand)]
pub(crate) enum PolicyAction {
    /// Print the running policy.
    Get,
    /// Switch every queue to another policy.
    Set {
        #[arg(help = policy_help("The policy"))]
        name: PolicySpec,
    },
}

#[derive(Args)]
#[group(id = "advice", required = true, multiple = false, args = ["priority", "share", "slo_us"])]
pub(crate) struct HintArgs {
    /// The process.
    #[arg(long)]
    pid: u32,
    /// One of its queues (default: all of them).
    #[arg(long)]
    queue: Option<u32>,
    /// Fixed priority; higher is more urgent.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Bandwidth share weight.
    #[arg(long)]
    share: Option<u32>,
    /// Request latency target in microseconds (`slo-aware`).
    #[arg(long)]
    slo_us: Option<u64>,
    #[command(flatten)]
    socket: Socket,
}

impl HintArgs {
    fn hint(&self) -> Option<Hint> {
        self.priority
            .map(Hint::Priority)
            .or(self.share.map(Hint::Share))
            .or(self.slo_us.map(|us| Hint::Slo(Nanos::from_us(us))))
    }
}

/// `xsched policy`: print the daemon's policy, or switch it.
pub(crate) fn run_policy(action: PolicyAction, socket: &Socket) -> Result<()> {
    match action {
        PolicyAction::Get => daemon_cmds::policy(&socket.path(), None),
        PolicyAction::Set { name } => daemon_cmds::policy(&socket.path(), Some(&name)),
    }
}

/// `xsched hint`: the one piece of advice given, sent to the daemon.
pub(crate) fn run_hint(args: &HintArgs) -> Result<()> {
    // The argument group requires exactly one piece of advice.
    let hint = args.hint().context("no advice given")?;
    daemon_cmds::hint(&args.socket.path(), args.pid, args.queue, hint)
}
