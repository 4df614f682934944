//! A kernel that reports its progress on the device: after each of its tiles, the worker that
//! ran it calls a function right there, saying whether that was the kernel's last tile (before
//! the device reports the command complete). The collector rows use it so that the end of an HP
//! kernel and the end of an LP release are handled on the device's worker itself: the LP work
//! the collector grants for the gap after an HP kernel starts on that worker, and an LP release
//! that runs out stops at the next checkpoint, with no thread woken in between (the HP thread's
//! wait, the launcher, the LP thread and the device's worker would each cost a wake-up).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use xsched_backend_cpu::Kernel;

/// What runs after each tile; the argument says whether it was the kernel's last.
pub(crate) type TileFn = Arc<dyn Fn(bool) + Send + Sync>;

/// `inner`, calling `after` after each tile (tiles may run on several workers: the one that
/// finishes the last of them is told so).
pub(crate) struct OnTile<K> {
    inner: K,
    after: TileFn,
    left: AtomicU32,
}

impl<K: Kernel> OnTile<K> {
    pub(crate) fn new(inner: K, after: TileFn) -> OnTile<K> {
        let left = AtomicU32::new(inner.tiles().max(1));
        OnTile { inner, after, left }
    }
}

impl<K: Kernel> Kernel for OnTile<K> {
    fn tiles(&self) -> u32 {
        self.inner.tiles()
    }

    fn run_tile(&self, tile: u32) {
        self.inner.run_tile(tile);
        let last = self.left.fetch_sub(1, Ordering::AcqRel) == 1;
        (self.after)(last);
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Tiles(Arc<Mutex<Vec<String>>>);

    impl Kernel for Tiles {
        fn tiles(&self) -> u32 {
            3
        }
        fn run_tile(&self, tile: u32) {
            self.0.lock().expect("log").push(format!("tile {tile}"));
        }
    }

    #[test]
    fn each_tile_is_reported_and_only_the_last_as_last_in_any_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let after: TileFn = Arc::new(move |last| seen.lock().expect("log").push(format!("{last}")));
        let k = OnTile::new(Tiles(log.clone()), after);
        for tile in [2, 0, 1] {
            k.run_tile(tile);
        }
        assert_eq!(k.tiles(), 3);
        assert_eq!(
            *log.lock().expect("log"),
            ["tile 2", "false", "tile 0", "false", "tile 1", "true"]
        );
    }
}
