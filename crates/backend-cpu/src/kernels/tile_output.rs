//! A kernel's output split by tile, each part behind its own (uncontended) lock so that tiles
//! running on different workers write without `unsafe`.

use std::sync::{Mutex, MutexGuard};

/// Output blocks, one per tile.
#[derive(Debug)]
pub(crate) struct TileOutput(Vec<Mutex<Vec<f32>>>);

impl TileOutput {
    /// From the initial contents of each tile's block.
    pub(crate) fn new(blocks: impl IntoIterator<Item = Vec<f32>>) -> TileOutput {
        TileOutput(blocks.into_iter().map(Mutex::new).collect())
    }

    /// How many tiles.
    pub(crate) fn tiles(&self) -> u32 {
        u32::try_from(self.0.len()).unwrap_or(u32::MAX)
    }

    /// Tile `tile`'s block, or `None` past the last tile.
    pub(crate) fn block(&self, tile: u32) -> Option<MutexGuard<'_, Vec<f32>>> {
        // A panic in another tile leaves its own block half-written, never this one.
        let m = self.0.get(tile as usize)?;
        Some(m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Every block in order, concatenated.
    pub(crate) fn concat(&self) -> Vec<f32> {
        (0..self.tiles())
            .filter_map(|t| self.block(t).map(|b| b.clone()))
            .flatten()
            .collect()
    }
}
