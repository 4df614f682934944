//! Which engine holds a prompt's prefix in its cache, as far as the scheduler can tell from
//! what it sent where: the `prefix-affinity` router's memory.
//!
//! An engine keeps the KV of prompts it served (llama.cpp's slots keep their last prompt, vLLM's
//! and SGLang's prefix caches keep blocks) and prefills only what follows the longest prefix it
//! still holds. A conversation's next turn repeats the whole of the previous turn's context, so
//! sent where that turn ran, its prefill is mostly skipped. The gateway cannot see inside the
//! engines, so it does what llm-d's approximate prefix scorer does: it hashes each prompt in
//! whole blocks, each hash chaining those before it (so a block's hash names the whole prefix up
//! to it), and remembers, per engine, the hashes it sent there, the least recently sent
//! forgotten first beyond [`BLOCKS_PER_ENGINE`]. A request's match on an engine is the number of
//! its leading blocks found there.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A prompt's prefix: the chained hashes of its whole blocks, first block first.
pub type Prefix = Arc<[u64]>;

/// Blocks remembered per engine (the least recently sent forgotten first).
pub const BLOCKS_PER_ENGINE: usize = 16_384;

/// What was sent to one engine, least recently sent first.
#[derive(Debug, Clone)]
pub(crate) struct PrefixCache {
    /// Each remembered hash and when it was last sent (a count of blocks sent).
    last_sent: HashMap<u64, u64>,
    /// Hashes in the order they were sent, with when; an entry whose hash was sent again
    /// since is stale and skipped when it comes up.
    order: VecDeque<(u64, u64)>,
    /// Blocks sent so far.
    clock: u64,
    /// Hashes remembered at most.
    capacity: usize,
}

impl Default for PrefixCache {
    fn default() -> PrefixCache {
        PrefixCache::with_capacity(BLOCKS_PER_ENGINE)
    }
}

impl PrefixCache {
    /// A cache remembering `capacity` hashes (at least one).
    pub fn with_capacity(capacity: usize) -> PrefixCache {
        PrefixCache {
            last_sent: HashMap::new(),
            order: VecDeque::new(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// How many of `prefix`'s leading blocks were sent here and are still remembered.
    pub fn matched(&self, prefix: &[u64]) -> usize {
        // A chained hash names its whole prefix: the first miss ends the match.
        prefix
            .iter()
            .take_while(|h| self.last_sent.contains_key(h))
            .count()
    }

    /// `prefix` was sent here.
    pub fn record(&mut self, prefix: &[u64]) {
        for &hash in prefix {
            self.clock += 1;
            self.last_sent.insert(hash, self.clock);
            self.order.push_back((hash, self.clock));
        }
        // Forget the least recently sent beyond the capacity (stale entries, of hashes sent
        // again since, go as they come up).
        while self.last_sent.len() > self.capacity {
            let Some((hash, at)) = self.order.pop_front() else {
                break;
            };
            if self.last_sent.get(&hash) == Some(&at) {
                self.last_sent.remove(&hash);
            }
        }
        // A conversation re-sends its history every turn, each time leaving stale entries: past
        // twice the capacity they are dropped at once (amortized O(1) a block).
        if self.order.len() > 2 * self.capacity {
            let last_sent = &self.last_sent;
            self.order.retain(|(h, at)| last_sent.get(h) == Some(at));
        }
    }

    /// Hashes remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.last_sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_match_is_the_leading_blocks_found() {
        let mut c = PrefixCache::default();
        c.record(&[1, 2, 3]);
        assert_eq!(
            c.matched(&[1, 2, 3, 4]),
            3,
            "the next turn repeats the prefix"
        );
        assert_eq!(c.matched(&[1, 9, 3]), 1, "a miss ends the match");
        assert_eq!(c.matched(&[7]), 0);
        assert_eq!(c.matched(&[]), 0);
    }

    #[test]
    fn the_least_recently_sent_is_forgotten_first() {
        let mut c = PrefixCache::with_capacity(3);
        c.record(&[1, 2]);
        c.record(&[3]);
        c.record(&[1]);
        c.record(&[4]);
        assert_eq!(c.matched(&[2]), 0, "2 was sent least recently");
        assert_eq!(c.matched(&[1]), 1, "1 was sent again");
        assert_eq!(c.matched(&[3]), 1);
        assert_eq!(c.matched(&[4]), 1);
    }

    #[test]
    fn a_history_sent_again_every_turn_stays_remembered_whole() {
        let mut c = PrefixCache::with_capacity(10);
        for turn in 1..=10 {
            let history: Vec<u64> = (1..=turn).collect();
            c.record(&history);
        }
        let all: Vec<u64> = (1..=10).collect();
        assert_eq!(
            c.matched(&all),
            10,
            "55 sends of 10 hashes, all still remembered"
        );
    }

    proptest! {
        #[test]
        fn memory_stays_bounded(sends in prop::collection::vec(prop::collection::vec(0u64..50, 0..8), 0..200)) {
            let mut c = PrefixCache::with_capacity(10);
            for s in &sends {
                c.record(s);
                prop_assert!(c.len() <= 10);
                prop_assert!(c.order.len() <= 20);
            }
            // The last send is remembered whole when it fits.
            if let Some(last) = sends.last() {
                let mut distinct = last.clone();
                distinct.sort_unstable();
                distinct.dedup();
                if distinct.len() <= 10 {
                    prop_assert_eq!(c.matched(last), last.len());
                }
            }
        }
    }
}
