//! The built-in kernels: real computations, tiled so that every tile boundary is a checkpoint.
//!
//! - [`Spin`]: a calibrated busy loop of a given duration (stands in for any compute kernel
//!   whose length you want to control exactly).
//! - [`MatMul`]: a tiled f32 matrix multiply (row blocks of the output).
//! - [`Saxpy`]: the vector kernel `y = a·x + y`. It is deliberately *not* idempotent: running
//!   a tile twice changes the result, so equal results after interrupt + restore prove that no
//!   work was redone.

mod data;
mod matmul;
mod saxpy;
mod spin;
mod tile_output;

pub use matmul::MatMul;
pub use saxpy::Saxpy;
pub use spin::{DEFAULT_CHECKPOINT, Spin, spin_rate};
