//! What a soak runs with, and why it could not run: the parameters the CLI fills in and the
//! errors every step of the run shares.

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
