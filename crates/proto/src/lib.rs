//! # xsched-proto
//!
//! What clients and the daemon say to each other, and how it travels. A frame is a 4-byte
//! little-endian length followed by that many bytes of a postcard-encoded message; frames larger
//! than [`MAX_FRAME`] are refused before anything is allocated. The first frame of a connection
//! is [`ClientMsg::Hello`] carrying [`VERSION`]; the daemon answers [`DaemonMsg::Welcome`] or
//! closes with [`DaemonMsg::Error`]. A frame that does not decode closes its connection (only
//! that one).
//!
//! Queue ids on the wire are the *client's* ids; the daemon maps them to its own. Who a client
//! is (pid, uid) comes from the socket's peer credentials, never from a message. Messages are
//! made of this crate's own types ([`WireHints`], [`WireHint`]), not the core's, and a
//! golden-bytes test pins the encoding of every message to [`VERSION`]; the handshake frames
//! (`Hello`, `Welcome`, `Error`) are the same in every version, so a refusal is always readable.
//! [`client::connect`] is the one client-side handshake, and every client write goes through
//! [`client::NoSigPipe`]. What an operator reads off the rows of `Top` (a queue's
//! [`QueueState`], the [`account_totals`] per process and tenant) is here too.
//!
//! # Errors
//!
//! Every fallible function returns [`ProtoError`]: a frame that could not be read or written, a
//! client that could not talk to the daemon, or hints off the wire that the core refuses.

pub mod client;
mod codec;
mod messages;
mod top;
mod wire;

pub use codec::{MAX_FRAME, ProtoError, read_frame, write_frame};
pub use messages::{
    ClientMsg, DaemonMsg, QueueStats, TOP_PAGE_ROWS, TopRow, VERSION, WireAccount, WireRolloutMode,
};
pub use top::{ProcessTotal, ProcessTotals, QueueState, TenantTotal, TenantTotals, account_totals};
pub use wire::{WireHint, WireHints};

/// The daemon's socket path: `$XSCHED_SOCKET`, else `$XDG_RUNTIME_DIR/xsched.sock`, else
/// `/tmp/xsched-<uid>/xsched.sock` (the real uid of this process): a directory only its user may
/// enter, which the daemon creates with mode 0700 and refuses to use when another user owns it
/// or others may write to it, so nobody can put an impostor's socket where a user's clients
/// look.
pub fn default_socket_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("XSCHED_SOCKET") {
        return p.into();
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        return std::path::Path::new(&dir).join("xsched.sock");
    }
    std::path::PathBuf::from(format!("/tmp/xsched-{}/xsched.sock", nix::unistd::getuid()))
}
