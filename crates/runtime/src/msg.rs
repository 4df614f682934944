//! The launcher's mailbox: what the queue, its completion sinks and its refill hook tell the
//! launcher thread. Its own file so that everyone who writes to the launcher does not depend on
//! the launcher itself.

use crossbeam_channel::Sender;
use xsched_core::{CommandId, Nanos};

/// A message to the launcher.
pub(crate) enum Msg {
    /// The backend finished `cmd` (a sync point, or anything while watched) at this time.
    Synced(CommandId, Nanos),
    /// Look at the hardware watermark now.
    Observe,
    /// Drop every pending command; the count goes back on the channel.
    Cancel(Sender<usize>),
    /// Drain what was submitted, then stop.
    Close,
}
