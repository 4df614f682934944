//! When control threads are real-time, as the process's environment says: [`RT_CONTROL`]
//! parsed into an [`RtControl`]. The runtime and the daemon parse it where they read the rest of
//! their environment, so that a bad value is refused there; the guards read it once per process.

use std::sync::OnceLock;

/// The variable that chooses when control threads are real-time ([`RtControl`]).
pub const RT_CONTROL: &str = "XSCHED_RT_CONTROL";

/// The values [`RT_CONTROL`] accepts, as an error names them.
pub const RT_CONTROL_VALUES: &str =
    "auto (the default), 1, on, true or yes (always), 0, off, false or no (never)";

/// When control threads run `SCHED_FIFO` ([`RT_CONTROL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RtControl {
    /// Never (`0`, `off`, `false`, `no`).
    Never,
    /// Always (`1`, `on`, `true`, `yes`).
    Always,
    /// While threads wait for the machine's CPUs (`auto`, empty, or unset).
    #[default]
    WhileContended,
}

/// A value of [`RT_CONTROL`] that is none of [`RT_CONTROL_VALUES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{RT_CONTROL}={value:?}: expected {RT_CONTROL_VALUES}")]
pub struct BadRtControl {
    /// The value (lossily, if it is not UTF-8).
    pub value: String,
}

impl RtControl {
    /// What `value` of [`RT_CONTROL`] (`None`: unset) asks for; case and surrounding blanks do
    /// not matter.
    pub fn parse(value: Option<&str>) -> Result<RtControl, BadRtControl> {
        let Some(value) = value else {
            return Ok(RtControl::WhileContended);
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(RtControl::WhileContended),
            "1" | "on" | "true" | "yes" => Ok(RtControl::Always),
            "0" | "off" | "false" | "no" => Ok(RtControl::Never),
            _ => Err(BadRtControl {
                value: value.to_string(),
            }),
        }
    }

    /// What the process's [`RT_CONTROL`] asks for (a value that is not UTF-8 is refused too).
    /// The runtime and the daemon call this where they read their environment, so a bad value
    /// is an error there.
    pub fn from_env() -> Result<RtControl, BadRtControl> {
        match std::env::var_os(RT_CONTROL) {
            None => RtControl::parse(None),
            Some(v) => match v.to_str() {
                Some(v) => RtControl::parse(Some(v)),
                None => Err(BadRtControl {
                    value: v.to_string_lossy().into_owned(),
                }),
            },
        }
    }

    /// [`from_env`](Self::from_env), read once per process; a bad value (already refused where
    /// the runtime or the daemon started) means [`Never`](RtControl::Never), said once.
    pub(super) fn configured() -> RtControl {
        static WHEN: OnceLock<RtControl> = OnceLock::new();
        *WHEN.get_or_init(|| {
            RtControl::from_env().unwrap_or_else(|e| {
                tracing::warn!("{e}; control threads stay at normal priority");
                RtControl::Never
            })
        })
    }
}
