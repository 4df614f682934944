//! What a soak runs with: the parameters, and the settings the CLI overrides them with. (Why a
//! soak could not run is a [`BenchError`](crate::BenchError).)

use std::time::Duration;

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
