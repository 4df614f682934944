//! The stream's watcher thread: it waits for each launched command's event in order, reports
//! the completion, runs the XQueue's completion hook when that left it work, and opens the gate
//! of a call found waiting behind its own gate (see the module docs of `stream`).

use super::shared::{SELF_BLOCK_AFTER, SELF_BLOCK_AFTER_AGAIN, StreamShared, WATCHER, Watch};
use crate::event::Event;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use xsched_runtime::{CommandError, CompletionHook};

/// How often an idle watcher looks for a call waiting behind its own gate: every
/// [`SELF_BLOCK_AFTER`], and every half of [`SELF_BLOCK_AFTER_AGAIN`] once the stream has had one.
fn self_block_poll(seen: bool) -> Duration {
    if seen {
        SELF_BLOCK_AFTER_AGAIN / 2
    } else {
        SELF_BLOCK_AFTER
    }
}

impl StreamShared {
    /// The completion hook, if it has work now.
    fn due_hook(&self) -> Option<Arc<CompletionHook>> {
        self.hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .filter(|h| h.is_due())
    }

    /// A completion was reported inside `launch` (a failed command): on the watcher, its loop
    /// runs the hook next; elsewhere the launcher thread takes what is due.
    pub(super) fn after_inline_completion(&self) {
        if !WATCHER.get()
            && let Some(hook) = self.due_hook()
        {
            hook.hand_over();
        }
    }

    /// The watcher: waits for each launched command's event in order, reports it, and runs the
    /// completion hook when the completion left it work (out of every lock of the stream).
    pub(super) fn watch(&self, rx: &Receiver<Watch>) {
        WATCHER.set(true);
        if let Err(e) = self.make_current() {
            tracing::warn!("stream watcher: {e}");
        }
        loop {
            let poll = self_block_poll(self.self_blocked.load(Ordering::Relaxed));
            let Watch { seq, event, done } = match rx.recv_timeout(poll) {
                Ok(watch) => watch,
                Err(RecvTimeoutError::Timeout) => {
                    self.release_self_blocked();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let result = event.as_ref().map_or(Ok(()), Event::wait);
            if let Some(event) = event {
                self.events.put(event);
            }
            self.finish(seq);
            if let Some(done) = done {
                done.complete(result.map_err(|e| CommandError::Failed(e.to_string())));
            }
            // A refill's own launches may fail inline and leave more for the hook.
            while let Some(hook) = self.due_hook() {
                hook.run();
            }
            self.release_self_blocked();
        }
    }

    /// Open the gate of a call that waits behind it (see the module docs).
    fn release_self_blocked(&self) {
        let mut state = self.state();
        let Some((seq, since)) = state.calling else {
            return;
        };
        let seen = self.self_blocked.load(Ordering::Relaxed);
        let after = if seen {
            SELF_BLOCK_AFTER_AGAIN
        } else {
            SELF_BLOCK_AFTER
        };
        if since.elapsed() < after {
            return;
        }
        let (Some(word), Some(value)) = (&self.word, state.gates.release_blocked(seq)) else {
            return;
        };
        word.store(value);
        if !seen {
            self.self_blocked.store(true, Ordering::Relaxed);
            tracing::warn!(
                "stream {:?}: a call waited {} ms behind its own gate (it blocks until the stream \
                 reaches it); opened, it runs unscheduled, as will any such call on this stream \
                 (after {} ms from now on)",
                self.stream,
                since.elapsed().as_millis(),
                SELF_BLOCK_AFTER_AGAIN.as_millis()
            );
        }
    }
}
