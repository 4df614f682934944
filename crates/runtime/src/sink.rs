//! The completion sink of one XQueue: where the backend reports each command's end. It
//! records the completion in the queue's tracker, and wakes the launcher, or runs the refill
//! on the completing thread, when somebody must look.

use crate::clock;
use crate::completion::CompletionSink;
use crate::error::CommandError;
use crate::msg::Msg;
use crate::refill::Deferral;
use crate::shared::Tracker;
use crossbeam_channel::Sender;
use xsched_core::CommandId;

/// The completion sink of one XQueue: records, and wakes the launcher when it must look. The
/// queue has two: one for tails (synchronization points only because nothing else was pending),
/// which are observed only when no later command covers them (`Tracker::tail_needed`), and
/// one for everything else.
pub(crate) struct QueueSink {
    pub(crate) tracker: std::sync::Arc<Tracker>,
    pub(crate) launcher: Sender<Msg>,
    pub(crate) tails: bool,
    /// The queue's completion hook: where the backend runs one, synchronization points are
    /// observed and refilled on the completing thread instead of waking the launcher.
    pub(crate) deferral: std::sync::Arc<Deferral>,
}

impl CompletionSink for QueueSink {
    fn complete(&self, cmd: CommandId, sync: bool, result: Result<(), CommandError>) {
        self.tracker.record_hw_completion(cmd, result);
        let sync = sync && (!self.tails || self.tracker.tail_needed(cmd));
        let wanted = self.tracker.wanted(cmd);
        if sync || wanted || self.tracker.refill_due(cmd) {
            let at = clock::now();
            // A completion somebody waits for (a waiter, or the launcher watching) goes to the
            // launcher as before; the others, to the hook when the backend runs one.
            if !wanted && self.deferral.defer(cmd, at) {
                return;
            }
            // The launcher may be gone when a queue is torn down; nothing waits then.
            let _ = self.launcher.send(Msg::Synced(cmd, at));
        }
    }

    fn device_time(&self, _cmd: CommandId, time: std::time::Duration) {
        self.tracker.add_device_time(time);
    }
}
