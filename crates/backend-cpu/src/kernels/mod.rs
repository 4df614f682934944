//! The built-in kernels: real computations, tiled so that every tile boundary is a checkpoint.
//!
//! - [`Spin`]: a calibrated busy loop of a given duration (stands in for any compute kernel
//!   whose length you want to control exactly).
//! - [`MatMul`]: a tiled f32 matrix multiply (row blocks of the output).
//! - [`Saxpy`]: the vector kernel `y = a·x + y`. It is deliberately *not* idempotent: running
//!   a tile twice changes the result, so equal results after interrupt + restore prove that no
//!   work was redone.

mod matmul;
mod saxpy;
mod spin;
mod tile_output;

pub use matmul::MatMul;
pub use saxpy::Saxpy;
pub use spin::{DEFAULT_CHECKPOINT, Spin, spin_rate};
pub(crate) use tile_output::TileOutput;

/// Deterministic pseudo-random f32 inputs in [-1, 1) from a seed (SplitMix64), so results can
/// be compared across runs without storing data.
pub(crate) fn inputs(seed: u64, len: usize) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}
