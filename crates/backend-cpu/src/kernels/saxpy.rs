//! The vector kernel `y = a·x + y`, in chunks. Not idempotent, on purpose.

use crate::kernel::Kernel;
use crate::kernels::inputs;
use std::sync::Mutex;

/// `y ← a·x + y` over `len` elements, one tile per `chunk` elements.
#[derive(Debug)]
pub struct Saxpy {
    a: f32,
    chunk: usize,
    x: Vec<f32>,
    y: Vec<Mutex<Vec<f32>>>,
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
            y: y0.chunks(chunk).map(|c| Mutex::new(c.to_vec())).collect(),
        }
    }

    /// The current `y`.
    pub fn result(&self) -> Vec<f32> {
        self.y
            .iter()
            .flat_map(|c| {
                c.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .collect()
    }
}

impl Kernel for Saxpy {
    fn tiles(&self) -> u32 {
        u32::try_from(self.y.len()).unwrap_or(u32::MAX)
    }

    fn run_tile(&self, tile: u32) {
        let t = tile as usize;
        let Some(chunk) = self.y.get(t) else { return };
        let mut y = chunk
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let x = &self.x[t * self.chunk..];
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
