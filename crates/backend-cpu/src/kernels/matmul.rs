//! A tiled f32 matrix multiply `C = A × B` (n × n), one tile per block of output rows.

use crate::kernel::Kernel;
use crate::kernels::data::inputs;
use crate::kernels::tile_output::TileOutput;

/// `C = A × B` with deterministic inputs; each tile computes `rows_per_tile` rows of C.
#[derive(Debug)]
pub struct MatMul {
    n: usize,
    rows_per_tile: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    c: TileOutput,
}

impl MatMul {
    /// An n × n multiply of inputs generated from `seed`, in tiles of `rows_per_tile` rows.
    pub fn new(n: usize, rows_per_tile: usize, seed: u64) -> MatMul {
        let n = n.max(1);
        let rows_per_tile = rows_per_tile.clamp(1, n);
        let tiles = n.div_ceil(rows_per_tile);
        MatMul {
            n,
            rows_per_tile,
            a: inputs(seed, n * n),
            b: inputs(seed ^ 0xB, n * n),
            c: TileOutput::new((0..tiles).map(|t| {
                let rows = rows_per_tile.min(n - t * rows_per_tile);
                vec![0.0; rows * n]
            })),
        }
    }

    /// The product, row-major (zeros where tiles have not run).
    pub fn result(&self) -> Vec<f32> {
        self.c.concat()
    }
}

impl Kernel for MatMul {
    fn tiles(&self) -> u32 {
        self.c.tiles()
    }

    fn run_tile(&self, tile: u32) {
        let Some(mut out) = self.c.block(tile) else {
            return;
        };
        let t = tile as usize;
        let n = self.n;
        let first_row = t * self.rows_per_tile;
        for (r, row) in out.chunks_mut(n).enumerate() {
            let a_row = &self.a[(first_row + r) * n..(first_row + r + 1) * n];
            row.fill(0.0);
            for (k, &a) in a_row.iter().enumerate() {
                let b_row = &self.b[k * n..(k + 1) * n];
                for (c, &b) in row.iter_mut().zip(b_row) {
                    *c += a * b;
                }
            }
        }
    }

    fn name(&self) -> &'static str {
        "matmul"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_naive_multiply() {
        let k = MatMul::new(7, 3, 42);
        for t in 0..k.tiles() {
            k.run_tile(t);
        }
        let c = k.result();
        let (a, b) = (&k.a, &k.b);
        for i in 0..7 {
            for j in 0..7 {
                let want: f32 = (0..7).map(|x| a[i * 7 + x] * b[x * 7 + j]).sum();
                assert!((c[i * 7 + j] - want).abs() < 1e-5);
            }
        }
    }
}
