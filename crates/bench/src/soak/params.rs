//! What a soak runs with, and why it could not run: the parameters, the settings the CLI
//! overrides them with, and the errors every step of the run shares.

use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// What a soak run does.
#[derive(Clone, Debug)]
pub struct SoakParams {
    /// Client processes alive at once.
    pub clients: usize,
    /// Commands in all, split evenly over the clients.
    pub commands: u64,
    /// Clients SIGKILLed (and replaced) during the run.
    pub kills: usize,
    /// Daemon disturbances: SIGKILL + restart and SIGSTOP/SIGCONT, alternately.
    pub restarts: usize,
    /// How long a stopped daemon stays stopped.
    pub stopped_for: Duration,
    /// Commands per second each client submits: with the commands per client this sets the
    /// run's length; the disturbances are spread evenly over it.
    pub rate: u32,
    /// Orders the disturbances and picks the clients to kill.
    pub seed: u64,
}

impl Default for SoakParams {
    fn default() -> Self {
        SoakParams {
            clients: 8,
            commands: 1_000_000,
            kills: 4,
            restarts: 3,
            stopped_for: Duration::from_millis(1500),
            rate: 10_000,
            seed: 1,
        }
    }
}

/// The settings `xsched bench soak` was given; each one left out keeps
/// [`SoakParams::default`]'s.
#[derive(Clone, Debug, Default)]
pub struct SoakOverrides {
    /// Client processes alive at once.
    pub clients: Option<usize>,
    /// Commands in all.
    pub commands: Option<u64>,
    /// Clients SIGKILLed and replaced during the run.
    pub kills: Option<usize>,
    /// Daemon disturbances.
    pub restarts: Option<usize>,
    /// Commands per second each client submits.
    pub rate: Option<u32>,
    /// Milliseconds a stopped daemon stays stopped.
    pub stopped_ms: Option<u64>,
    /// Seed for the order of disturbances and the clients killed.
    pub seed: Option<u64>,
}

impl SoakOverrides {
    /// The defaults with these settings in place.
    pub fn params(&self) -> SoakParams {
        let d = SoakParams::default();
        SoakParams {
            clients: self.clients.unwrap_or(d.clients),
            commands: self.commands.unwrap_or(d.commands),
            kills: self.kills.unwrap_or(d.kills),
            restarts: self.restarts.unwrap_or(d.restarts),
            rate: self.rate.unwrap_or(d.rate),
            stopped_for: self.stopped_ms.map_or(d.stopped_for, Duration::from_millis),
            seed: self.seed.unwrap_or(d.seed),
        }
    }
}

/// Why a soak could not run (a failed check is not an error: it is in the report).
#[derive(Debug, Error)]
pub enum SoakError {
    /// A process could not be started, signalled or waited for.
    #[error("{what}: {source}")]
    Io {
        /// Which step.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The daemon did not come up.
    #[error("the daemon did not listen on {0} within 10 s")]
    NoDaemon(PathBuf),
    /// A surviving client failed or printed something that is not its report.
    #[error("client {pid} failed: {why}")]
    Client {
        /// Its pid.
        pid: u32,
        /// What went wrong.
        why: String,
    },
    /// The run did not finish in time.
    #[error("the clients did not finish within {0:?}")]
    Timeout(Duration),
}

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SoakError {
    let what = what.into();
    move |source| SoakError::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_left_out_keeps_the_default() {
        let d = SoakOverrides::default().params();
        assert_eq!(
            (d.clients, d.commands, d.kills, d.restarts),
            (8, 1_000_000, 4, 3)
        );
        assert_eq!(
            (d.rate, d.stopped_for, d.seed),
            (10_000, Duration::from_millis(1500), 1)
        );
        let o = SoakOverrides {
            clients: Some(2),
            stopped_ms: Some(20),
            seed: Some(9),
            ..SoakOverrides::default()
        }
        .params();
        assert_eq!(
            (o.clients, o.stopped_for, o.seed),
            (2, Duration::from_millis(20), 9)
        );
        assert_eq!((o.commands, o.kills, o.rate), (d.commands, d.kills, d.rate));
    }
}
