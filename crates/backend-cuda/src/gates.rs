//! The bookkeeping of one stream's gate, apart from the driver so it can be tested exactly.
//!
//! Each gated command waits in the stream for a host-mapped word to reach its sequence number
//! (`cuStreamWaitValue32`, "greater or equal"). The host raises the word to open gates:
//! never past a command the XQueue has not launched yet (*permitted*), and, while the stream is
//! active, at most `depth` commands beyond the last one observed complete, so the device always
//! has the next command ready but queued work stays behind a closed gate. Deactivating stops the
//! raising: commands already past their gate finish, the rest wait (Level 2). The one exception
//! to "permitted": the gate of a call that waits for its own command, opened once every gate
//! before it is ([`Gates::release_blocked`]).

/// Gate state of one stream. Sequence numbers start at 1 (the word starts at 0: all closed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gates {
    /// The last sequence number handed out.
    assigned: u32,
    /// Gates the XQueue has launched (may be opened), in order.
    permitted: u32,
    /// Commands observed complete, in order.
    completed: u32,
    /// The word's value: gates up to here are open.
    opened: u32,
    /// Whether the stream may open gates (false while deactivated).
    active: bool,
    /// How many commands past the completed ones may be open.
    depth: u32,
}

impl Gates {
    /// Closed gates, active, with `depth` (at least 1) open beyond the completed commands.
    pub(crate) fn new(depth: u32) -> Gates {
        Gates {
            assigned: 0,
            permitted: 0,
            completed: 0,
            opened: 0,
            active: true,
            depth: depth.max(1),
        }
    }

    /// The next sequence number, or `None` when the 32-bit word is used up (the stream then runs
    /// ungated).
    pub(crate) fn assign(&mut self) -> Option<u32> {
        let next = self.assigned.checked_add(1)?;
        self.assigned = next;
        Some(next)
    }

    /// The XQueue launched gate `seq` (launches come in order).
    pub(crate) fn permit(&mut self, seq: u32) {
        self.permitted = self.permitted.max(seq);
    }

    /// Gated command `seq` completed (completions come in order).
    pub(crate) fn complete(&mut self, seq: u32) {
        self.completed = self.completed.max(seq);
    }

    /// Stop or resume opening gates.
    pub(crate) fn set_active(&mut self, active: bool) {
        self.active = active;
    }

    /// Open gate `seq` before the XQueue launched it, when the call that enqueued it waits for
    /// the stream to reach it (a call that blocks its caller, which would wait behind its own
    /// gate for ever): only while the stream is active, every gate before it is open and it is
    /// within `depth` of the completed commands, so nothing the XQueue holds runs early and
    /// deactivating still holds all but `depth` commands. The word's new value, if it opens.
    pub(crate) fn release_blocked(&mut self, seq: u32) -> Option<u32> {
        let next = self.opened.checked_add(1) == Some(seq);
        let near = seq <= self.completed.saturating_add(self.depth);
        (self.active && next && near).then(|| {
            self.opened = seq;
            seq
        })
    }

    /// The new value of the word, if gates should open now.
    pub(crate) fn open(&mut self) -> Option<u32> {
        if !self.active {
            return None;
        }
        let target = self
            .permitted
            .min(self.completed.saturating_add(self.depth));
        (target > self.opened).then(|| {
            self.opened = target;
            target
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_open_in_order_up_to_depth_beyond_the_completed() {
        let mut g = Gates::new(2);
        let seqs: Vec<u32> = (0..4).filter_map(|_| g.assign()).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert_eq!(g.open(), None, "nothing launched yet");
        for s in seqs {
            g.permit(s);
        }
        assert_eq!(g.open(), Some(2), "the running command and the next one");
        assert_eq!(g.open(), None, "already open");
        g.complete(1);
        assert_eq!(g.open(), Some(3));
        g.complete(3);
        assert_eq!(g.open(), Some(4), "never past the permitted");
    }

    #[test]
    fn deactivated_gates_stay_closed_until_reactivated() {
        let mut g = Gates::new(1);
        for _ in 0..3 {
            let s = g.assign().expect("seq");
            g.permit(s);
        }
        assert_eq!(g.open(), Some(1));
        g.set_active(false);
        g.complete(1);
        assert_eq!(g.open(), None, "queued work stays behind the gate");
        g.set_active(true);
        assert_eq!(g.open(), Some(2));
    }

    #[test]
    fn a_blocked_calls_gate_opens_only_right_after_open_ones_within_depth_on_an_active_stream() {
        let mut g = Gates::new(1);
        let (a, b, c) = (g.assign(), g.assign(), g.assign());
        let (a, b, c) = (a.expect("seq"), b.expect("seq"), c.expect("seq"));
        assert_eq!(g.release_blocked(b), None, "gate 1 is still closed");
        assert_eq!(g.release_blocked(a), Some(a), "nothing before the first");
        g.permit(a);
        assert_eq!(g.open(), None, "already open");
        assert_eq!(
            g.release_blocked(b),
            None,
            "beyond depth 1 of the completed"
        );
        g.complete(a);
        g.set_active(false);
        assert_eq!(g.release_blocked(b), None, "a deactivated stream holds it");
        g.set_active(true);
        assert_eq!(g.release_blocked(b), Some(b));
        assert_eq!(g.release_blocked(b), None, "open already");
        g.permit(b);
        g.permit(c);
        assert_eq!(g.open(), None, "depth 1: gate 2 is the one open");
        g.complete(b);
        assert_eq!(
            g.open(),
            Some(c),
            "launches after an early release open as before"
        );
    }

    /// What the stream may do next: a new gate, the XQueue launching the next one, the device
    /// completing the next launched and open one, (de)activating, pumping, or the call behind
    /// the newest gate waiting for it.
    #[derive(Clone, Debug)]
    enum Step {
        Assign,
        Permit,
        Complete,
        Active(bool),
        Open,
        Blocked,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            3 => Just(Step::Assign),
            3 => Just(Step::Permit),
            3 => Just(Step::Complete),
            1 => any::<bool>().prop_map(Step::Active),
            3 => Just(Step::Open),
            2 => Just(Step::Blocked),
        ]
    }

    proptest::proptest! {
        /// Whatever happens in whatever order, the word only rises; it rises only while the
        /// stream is active and never past `depth` beyond the completed commands; and every gate
        /// it opens was launched, except the newest one when its call waited for it right after
        /// the open ones.
        #[test]
        fn the_word_opens_only_launched_or_blocked_gates_within_depth_while_active(
            depth in 1u32..4,
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            let mut g = Gates::new(depth);
            let mut released = 0;
            for s in steps {
                let before = g.opened;
                let raised = match s {
                    Step::Assign => { g.assign(); None }
                    Step::Permit => {
                        if g.permitted < g.assigned { g.permit(g.permitted + 1); }
                        None
                    }
                    Step::Complete => {
                        let next = g.completed + 1;
                        if next <= g.opened && next <= g.permitted { g.complete(next); }
                        None
                    }
                    Step::Active(a) => { g.set_active(a); None }
                    Step::Open => g.open(),
                    Step::Blocked => {
                        let newest = g.assigned;
                        let r = (newest > g.permitted).then(|| g.release_blocked(newest)).flatten();
                        if let Some(v) = r {
                            proptest::prop_assert_eq!(v, before + 1, "only the gate right after the open ones");
                            released = v;
                        }
                        r
                    }
                };
                proptest::prop_assert!(g.opened >= before, "the word never falls");
                if let Some(v) = raised {
                    proptest::prop_assert_eq!(v, g.opened);
                    proptest::prop_assert!(g.active, "raised while deactivated");
                    proptest::prop_assert!(v <= g.completed + depth, "past depth: {:?}", g);
                    proptest::prop_assert!(v <= g.permitted.max(released), "an unlaunched gate: {:?}", g);
                } else {
                    proptest::prop_assert_eq!(g.opened, before);
                }
            }
        }
    }

    #[test]
    fn the_word_running_out_is_reported() {
        let mut g = Gates::new(1);
        g.assigned = u32::MAX - 1;
        assert_eq!(g.assign(), Some(u32::MAX));
        assert_eq!(g.assign(), None);
    }
}
