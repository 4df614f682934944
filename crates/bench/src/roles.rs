//! The roles of the `xsched worker` processes and how to start one. The experiments that run
//! workers beside each other (the two-process demo, the harvesting benchmark through the
//! daemon, the soak) start them from here; what each role runs is in
//! [`workers`](crate::workers). This is a module of its own because the experiments import the
//! roles while the roles' bodies import the experiments: apart, no file imports another back.

use crate::error::BenchError;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a worker process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Submit `commands` kernels with at most `window` outstanding; report the counts.
    Batch,
    /// The demo's foreground request stream; report its latency percentiles.
    Fg,
    /// The demo's background training loop until standard input closes; report its progress.
    Bg,
    /// The harvesting benchmark's HP service (`requests` measured); report its latencies.
    HpService,
    /// The harvesting benchmark's LP job (`kernel_us` kernels) until standard input closes;
    /// report when each kernel completed.
    Lp,
    /// The soak's client: `commands` host commands (at most `window` outstanding), each of
    /// which counts its own runs; report how many ran exactly once, more, or never.
    Soak,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Batch,
        Role::Fg,
        Role::Bg,
        Role::HpService,
        Role::Lp,
        Role::Soak,
    ];

    /// The role's name on the command line (`xsched worker --role NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Batch => "batch",
            Role::Fg => "fg",
            Role::Bg => "bg",
            Role::HpService => "hp-service",
            Role::Lp => "lp",
            Role::Soak => "soak",
        }
    }

    /// The role called `name`; the error lists the names (a clap value parser).
    pub fn from_name(name: &str) -> Result<Role, BenchError> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| BenchError::UnknownRole {
                name: name.to_string(),
                known: Role::ALL.map(Role::name).join(", "),
            })
    }
}

/// `exe worker --role <role>`: a worker process whose report comes back on its standard output
/// (its standard error is the caller's).
pub(crate) fn command(exe: &Path, role: Role) -> Command {
    let mut c = Command::new(exe);
    c.args(["worker", "--role", role.name()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}
