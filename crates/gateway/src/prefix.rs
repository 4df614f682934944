//! A request's prompt as chained hashes of whole blocks, what the `prefix-affinity` router
//! matches against what each engine was sent (`xsched_llm_core::prefix`).
//!
//! The gateway sees text, not the engine's tokens, so a block is [`BLOCK_BYTES`] bytes of the
//! prompt as the engine's chat template would lay it out: each message's role and text, in
//! order, with control characters as separators (text may hold them too: two prompts could
//! then share a hash, which costs a routing choice, nothing else). A conversation's next turn starts with the
//! previous turn's messages, so its leading blocks hash the same; the last, partial block is
//! not hashed (the next turn may extend it differently). Each hash covers its block and the
//! hash before it, so equal hashes mean equal prefixes. At most [`MAX_BLOCKS`] are hashed.

use std::hash::{DefaultHasher, Hash, Hasher};
use xsched_llm_core::prefix::Prefix;

/// Bytes per block (about 64 tokens of English).
pub const BLOCK_BYTES: usize = 256;
/// Blocks hashed at most (the first 1 MiB of a prompt).
pub const MAX_BLOCKS: usize = 4096;

/// Hashes `parts`, laid end to end, in whole blocks.
#[derive(Default)]
pub struct Blocks {
    hashes: Vec<u64>,
    block: Vec<u8>,
}

impl Blocks {
    /// Append `bytes` to the prompt.
    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.hashes.len() < MAX_BLOCKS {
            let take = (BLOCK_BYTES - self.block.len()).min(bytes.len());
            self.block.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.block.len() == BLOCK_BYTES {
                // `DefaultHasher::new()` has fixed keys: the same block hashes the same for the
                // gateway's whole life, which is all the router's memory needs.
                let mut h = DefaultHasher::new();
                self.hashes.last().copied().unwrap_or(0).hash(&mut h);
                self.block.hash(&mut h);
                self.hashes.push(h.finish());
                self.block.clear();
            }
        }
    }

    /// A chat message of `role` and `text`.
    pub fn message(&mut self, role: &str, text: &str) {
        self.push(role.as_bytes());
        self.push(b"\x1f");
        self.push(text.as_bytes());
        self.push(b"\x1e");
    }

    /// The hashes of the whole blocks.
    pub fn finish(self) -> Prefix {
        self.hashes.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(turns: &[(&str, &str)]) -> Prefix {
        let mut b = Blocks::default();
        for (role, text) in turns {
            b.message(role, text);
        }
        b.finish()
    }

    #[test]
    fn a_next_turn_repeats_the_previous_turns_blocks() {
        let question = "q".repeat(600);
        let answer = "a".repeat(300);
        let first = chat(&[("user", &question)]);
        let second = chat(&[
            ("user", &question),
            ("assistant", &answer),
            ("user", "and?"),
        ]);
        assert_eq!(first.len(), 2, "606 bytes: two whole blocks");
        assert_eq!(second.len(), 3);
        assert_eq!(&second[..2], &first[..]);
        let other = chat(&[("user", &"r".repeat(600))]);
        assert_ne!(other[0], first[0]);
        assert!(chat(&[("user", "short")]).is_empty(), "no whole block");
    }

    #[test]
    fn a_block_hash_names_its_whole_prefix() {
        let a = chat(&[("user", &format!("{}{}", "x".repeat(256), "y".repeat(256)))]);
        let b = chat(&[("user", &format!("{}{}", "z".repeat(256), "y".repeat(256)))]);
        assert_ne!(a[1], b[1], "the same second block after a different first");
    }

    #[test]
    fn at_most_max_blocks_are_hashed() {
        let mut b = Blocks::default();
        b.push(&vec![7; BLOCK_BYTES * (MAX_BLOCKS + 3)]);
        assert_eq!(b.finish().len(), MAX_BLOCKS);
    }
}
