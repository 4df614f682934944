//! What an accept loop does when `accept` fails: out of descriptors (`EMFILE`, `ENFILE`) or
//! memory, retrying at once would spin on the same error and flood the log. Instead the loop
//! sleeps a little before the next try, and says so once per streak of failures.

use std::time::Duration;

/// How long to wait after a failed `accept`.
const PAUSE: Duration = Duration::from_millis(100);

/// A streak of failed `accept`s on one listener.
#[derive(Default)]
pub(crate) struct AcceptBackoff {
    failing: bool,
}

impl AcceptBackoff {
    /// `accept` failed: log (once per streak) and pause.
    pub(crate) fn failed(&mut self, what: &str, e: &std::io::Error) {
        if !self.failing {
            tracing::warn!(
                "{what}: accept failed ({e}); retrying every {} ms until it works",
                PAUSE.as_millis()
            );
            self.failing = true;
        }
        std::thread::sleep(PAUSE);
    }

    /// `accept` worked: end the streak (and say so, if there was one).
    pub(crate) fn succeeded(&mut self, what: &str) {
        if std::mem::take(&mut self.failing) {
            tracing::info!("{what}: accepting again");
        }
    }
}
