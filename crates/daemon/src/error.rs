//! The daemon's one error ([`DaemonError`]: starting it, reading its configuration, a refused
//! priority) and what a configuration file's text can get wrong ([`InvalidConfig`], its payload).

use std::path::PathBuf;
use thiserror::Error;
use xsched_core::CoreError;
use xsched_sys::prompt::BadRtControl;

/// Why the daemon could not start, why its configuration cannot be used, or why a priority is
/// refused. Each message leaves its cause to the error's source.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// Another daemon answers on the socket.
    #[error("a daemon is already listening on {0}")]
    AlreadyRunning(PathBuf),
    /// The socket could not be created.
    #[error("cannot listen on {path}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The socket's place is not safe (another user could replace or impersonate it).
    #[error("refusing to listen on {path}: {why}")]
    Unsafe {
        /// The socket path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The policy name is unknown.
    #[error(transparent)]
    Policy(#[from] CoreError),
    /// `XSCHED_RT_CONTROL` holds a value that means nothing.
    #[error(transparent)]
    RtControl(#[from] BadRtControl),
    /// A thread could not be started.
    #[error("cannot start a thread")]
    Spawn(#[source] std::io::Error),
    /// A connection's peer credentials (`SO_PEERCRED`) could not be read.
    #[error("no peer credentials")]
    PeerCredentials(#[source] std::io::Error),
    /// The configuration file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is not valid (its source names the field and line).
    #[error("{path}: invalid configuration")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where.
        source: InvalidConfig,
    },
    /// A configuration's text is not valid (names the field and line).
    #[error(transparent)]
    Config(#[from] InvalidConfig),
    /// A user or group named in a rule does not exist on this machine.
    #[error("{field}: no {kind} called `{name}` on this machine")]
    UnknownName {
        /// Where it was named.
        field: String,
        /// `user` or `group`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// A priority outside what a peer may use (the daemon's `[authority]` configuration).
    #[error(
        "priority {priority} is outside uid {uid}'s range {min}..={max} (the daemon's [authority] configuration)"
    )]
    PriorityRefused {
        /// The priority asked for.
        priority: i32,
        /// The peer's uid.
        uid: u32,
        /// The lowest priority it may use.
        min: i32,
        /// The highest priority it may use.
        max: i32,
    },
}

/// Why a file's text is not a valid configuration: the field, and for what TOML itself refuses
/// the line.
#[derive(Debug, Error)]
pub enum InvalidConfig {
    /// Not TOML, or a field unknown or of the wrong type (the message names field and line).
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// `socket.mode` is not a permission mode.
    #[error("socket.mode: {0:#o} is not a permission mode (0o000..=0o777)")]
    SocketMode(u32),
    /// A priority range whose `min` is above its `max`.
    #[error("{field}: min {min} is above max {max}")]
    EmptyRange {
        /// The range's field.
        field: String,
        /// Its `min`.
        min: i32,
        /// Its `max`.
        max: i32,
    },
    /// A limit of 0.
    #[error("{0}: must be at least 1")]
    Zero(&'static str),
}
