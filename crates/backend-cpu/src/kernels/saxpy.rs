//! The vector kernel `y = a·x + y`, in chunks. Not idempotent, on purpose.

use crate::kernel::Kernel;
use crate::kernels::data::inputs;
use crate::kernels::tile_output::TileOutput;

/// `y ← a·x + y` over `len` elements, one tile per `chunk` elements.
#[derive(Debug)]
pub struct Saxpy {
    a: f32,
    chunk: usize,
    x: Vec<f32>,
    y: TileOutput,
}

impl Saxpy {
    /// Inputs generated from `seed`.
    pub fn new(len: usize, chunk: usize, a: f32, seed: u64) -> Saxpy {
        let chunk = chunk.max(1);
        let y0 = inputs(seed ^ 0x5, len);
        Saxpy {
            a,
            chunk,
            x: inputs(seed, len),
            y: TileOutput::new(y0.chunks(chunk).map(<[f32]>::to_vec)),
        }
    }

    /// The current `y`.
    pub fn result(&self) -> Vec<f32> {
        self.y.concat()
    }
}

impl Kernel for Saxpy {
    fn tiles(&self) -> u32 {
        self.y.tiles()
    }

    fn run_tile(&self, tile: u32) {
        let Some(mut y) = self.y.block(tile) else {
            return;
        };
        let x = &self.x[tile as usize * self.chunk..];
        for (y, &x) in y.iter_mut().zip(x) {
            *y += self.a * x;
        }
    }

    fn name(&self) -> &'static str {
        "saxpy"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_a_tile_twice_changes_the_result() {
        let once = Saxpy::new(10, 4, 2.0, 1);
        let twice = Saxpy::new(10, 4, 2.0, 1);
        for t in 0..once.tiles() {
            once.run_tile(t);
            twice.run_tile(t);
        }
        twice.run_tile(0);
        assert_ne!(once.result(), twice.result());
    }
}
