//! The daemon's configuration file (`xsched serve --config FILE`, TOML): who may do what, the
//! socket's permissions, and the limits that keep one client from exhausting the daemon.
//!
//! Every field has a default that is safe on a shared machine, so no file is needed: only root
//! and the daemon's own user may switch the policy, hint other users' processes or see them in
//! `xsched top`; everyone else registers queues with priorities in -100..=100; the socket is
//! mode 0600. A file names users and `@groups` to widen that (by number where the daemon's
//! machine has no such name: a container's tenants rarely have names in the daemon's image).
//! Unknown fields, users and groups are errors that name the field and line (a misspelt rule must not silently grant nothing).
//!
//! ```toml
//! [socket]
//! mode = 0o660            # who may connect at all (with `group`)
//! group = "gpu"
//!
//! [authority]
//! set_policy = ["alice", "@ops"]
//! hint_others = ["@ops"]
//! see_all = ["@ops"]
//! priority = { min = -100, max = 100 }   # everyone not matched below
//!
//! [[authority.priorities]]
//! who = ["@inference"]
//! min = -100
//! max = 1000
//!
//! [limits]
//! max_connections = 1024
//! max_connections_per_user = 256
//! max_pending_handshakes = 64
//! max_queues_per_client = 1024
//! tenant_max_pending = 4096     # per uid, over its queues (off by default)
//! tenant_inflight_us = 2000     # per uid, over its queues (off by default)
//! handshake_timeout_ms = 2000
//! ```
//!
//! What the `[authority]` names resolve to, and what the daemon asks of them, is `authority.rs`.

use crate::error::{DaemonError, InvalidConfig};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// The socket's permissions.
    pub socket: SocketConfig,
    /// Who may do what.
    pub authority: AuthorityConfig,
    /// Resource limits.
    pub limits: Limits,
}

/// `[socket]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SocketConfig {
    /// Permission bits of the socket file (connecting needs write permission).
    pub mode: u32,
    /// The group that owns the socket file (with `mode = 0o660`, its members may connect).
    pub group: Option<String>,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            mode: 0o600,
            group: None,
        }
    }
}

/// A priority range, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityRange {
    /// The lowest priority allowed.
    pub min: i32,
    /// The highest priority allowed.
    pub max: i32,
}

impl Default for PriorityRange {
    fn default() -> Self {
        PriorityRange {
            min: -100,
            max: 100,
        }
    }
}

/// A priority range for some users and groups.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityRule {
    /// User names and `@group` names.
    pub who: Vec<String>,
    /// The lowest priority they may use.
    pub min: i32,
    /// The highest.
    pub max: i32,
}

/// `[authority]`: user names and `@group` names, or their numbers where the daemon's machine
/// has no such name (root and the daemon's own user always may).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorityConfig {
    /// Who may switch the policy.
    pub set_policy: Vec<String>,
    /// Who may hint other users' processes.
    pub hint_others: Vec<String>,
    /// Who sees other users' processes in `xsched top` and may act on them.
    pub see_all: Vec<String>,
    /// The priority range of everyone no rule below names.
    pub priority: PriorityRange,
    /// Priority ranges for named users and groups (the first matching rule applies).
    pub priorities: Vec<PriorityRule>,
}

/// `[limits]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Connections at once, handshaking or not.
    pub max_connections: usize,
    /// Connections at once from one user other than root.
    pub max_connections_per_user: usize,
    /// Connections that have not finished their handshake; past this the oldest is dropped, so
    /// connections that never say hello cannot keep out one that does.
    pub max_pending_handshakes: usize,
    /// Queues one connection may register.
    pub max_queues_per_client: usize,
    /// How long a new connection has to say hello.
    pub handshake_timeout_ms: u64,
    /// Commands one tenant (a uid) may hold submitted but not launched, over all its queues:
    /// each queue gets an even share (at least one), re-divided as the tenant's queues come and
    /// go. Off by default.
    pub tenant_max_pending: Option<usize>,
    /// Device time (µs) one tenant may have launched but unfinished, over all its queues,
    /// shared out the same way (at least 1 µs each; it bounds what a higher-priority queue waits
    /// for at Level 1). Off by default.
    pub tenant_inflight_us: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_connections_per_user: 256,
            max_pending_handshakes: 64,
            max_queues_per_client: 1024,
            handshake_timeout_ms: 2000,
            tenant_max_pending: None,
            tenant_inflight_us: None,
        }
    }
}

impl Limits {
    /// The handshake timeout.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms.max(1))
    }
}

impl DaemonConfig {
    /// Read and check the file at `path`.
    pub fn load(path: &Path) -> Result<DaemonConfig, DaemonError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| DaemonError::Read {
            path: shown.clone(),
            source,
        })?;
        let config = DaemonConfig::checked(&text).map_err(|source| DaemonError::Invalid {
            path: shown,
            source,
        })?;
        config.authority()?;
        Ok(config)
    }

    /// Parse a file's text; the error names the field and line.
    pub fn parse(text: &str) -> Result<DaemonConfig, DaemonError> {
        Ok(DaemonConfig::checked(text)?)
    }

    /// Parse and check a file's text.
    fn checked(text: &str) -> Result<DaemonConfig, InvalidConfig> {
        let config: DaemonConfig = toml::from_str(text)?;
        if config.socket.mode > 0o777 {
            return Err(InvalidConfig::SocketMode(config.socket.mode));
        }
        let ranges = std::iter::once(("authority.priority".to_string(), config.authority.priority))
            .chain(
                config
                    .authority
                    .priorities
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        (
                            format!("authority.priorities[{i}]"),
                            PriorityRange {
                                min: r.min,
                                max: r.max,
                            },
                        )
                    }),
            );
        for (field, r) in ranges {
            if r.min > r.max {
                return Err(InvalidConfig::EmptyRange {
                    field,
                    min: r.min,
                    max: r.max,
                });
            }
        }
        let l = &config.limits;
        for (field, v) in [
            ("limits.max_connections", l.max_connections),
            (
                "limits.max_connections_per_user",
                l.max_connections_per_user,
            ),
            ("limits.max_pending_handshakes", l.max_pending_handshakes),
            ("limits.max_queues_per_client", l.max_queues_per_client),
            (
                "limits.tenant_max_pending",
                l.tenant_max_pending.unwrap_or(1),
            ),
            (
                "limits.tenant_inflight_us",
                usize::try_from(l.tenant_inflight_us.unwrap_or(1)).unwrap_or(usize::MAX),
            ),
        ] {
            if v == 0 {
                return Err(InvalidConfig::Zero(field));
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_name_the_field_and_line() {
        let parse_err = |text: &str| DaemonConfig::parse(text).expect_err("invalid").to_string();
        let e = parse_err("[limits]\nmax_conections = 3\n");
        assert!(e.contains("max_conections") && e.contains("line 2"), "{e}");
        let e = parse_err("[socket]\nmode = 0o7777\n");
        assert!(e.contains("socket.mode"), "{e}");
        let e = parse_err("[authority]\npriority = { min = 5, max = 1 }\n");
        assert!(e.contains("authority.priority"), "{e}");
        for zero in ["tenant_max_pending", "tenant_inflight_us"] {
            let e = parse_err(&format!("[limits]\n{zero} = 0\n"));
            assert!(e.contains(zero), "{e}");
        }
        let c = DaemonConfig::parse("[limits]\ntenant_max_pending = 8\n").expect("valid");
        assert_eq!(c.limits.tenant_max_pending, Some(8));
        let e = parse_err("[limits]\nmax_connections = 0\n");
        assert!(e.contains("limits.max_connections"), "{e}");
        let unknown = DaemonConfig::parse("[authority]\nsee_all = [\"no-such-user-xsched\"]\n")
            .expect("parses")
            .authority()
            .expect_err("unknown user");
        assert!(
            unknown.to_string().contains("no-such-user-xsched"),
            "{unknown}"
        );
    }
}
