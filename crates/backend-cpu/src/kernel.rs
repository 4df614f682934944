//! What the CPU device runs: resumable kernels made of tiles, and host callbacks.

use std::sync::Arc;

/// A computation split into tiles; every tile boundary is a preemption checkpoint.
///
/// Tiles may run concurrently on different workers, each exactly once (also across an
/// interrupt and restore), so a kernel whose tiles are not idempotent still gives the result
/// of an uninterrupted run.
pub trait Kernel: Send + Sync {
    /// How many tiles (at least one).
    fn tiles(&self) -> u32;
    /// Run tile `tile` (`0..tiles()`). A panic fails the command; the device keeps working.
    fn run_tile(&self, tile: u32);
    /// A short name for logs and errors.
    fn name(&self) -> &'static str {
        "kernel"
    }
}

/// One command of a CPU-device queue.
pub enum CpuCommand {
    /// A tiled kernel (shared, so the caller can read its results afterwards).
    Kernel(Arc<dyn Kernel>),
    /// A host function, run once on a worker; it cannot be interrupted midway.
    Host(Box<dyn FnOnce() + Send>),
}

impl CpuCommand {
    /// A kernel command.
    pub fn kernel(k: Arc<dyn Kernel>) -> CpuCommand {
        CpuCommand::Kernel(k)
    }

    /// A host-callback command.
    pub fn host(f: impl FnOnce() + Send + 'static) -> CpuCommand {
        CpuCommand::Host(Box::new(f))
    }
}

impl std::fmt::Debug for CpuCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuCommand::Kernel(k) => write!(f, "Kernel({}, {} tiles)", k.name(), k.tiles()),
            CpuCommand::Host(_) => write!(f, "Host"),
        }
    }
}
