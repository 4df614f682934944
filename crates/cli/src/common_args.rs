//! The flags several commands share (`--json`, `--socket`) and the help of a policy argument,
//! kept apart so that every command's module can read them without reading `main.rs`.

use clap::Args;
use std::path::PathBuf;

/// `--json`: one JSON document instead of tables.
#[derive(Args, Clone, Copy)]
pub(crate) struct Output {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--socket`: the daemon's socket.
#[derive(Args, Clone)]
pub(crate) struct Socket {
    /// Daemon socket (default: $XSCHED_SOCKET, else $XDG_RUNTIME_DIR/xsched.sock, else /tmp).
    /// Accepted before or after a subcommand (`xsched policy get --socket S`).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
}

impl Socket {
    pub(crate) fn path(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(xsched_proto::default_socket_path)
    }
}

/// The help of a policy argument: every policy the table registers, with its argument form.
pub(crate) fn policy_help(what: &str) -> String {
    format!("{what} ({})", xsched_core::policy::usage().join(", "))
}
