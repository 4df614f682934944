//! The gate word: one `u32` of pinned host memory mapped into the device, which a stream's
//! memory waits read and the host raises to open gates.

use crate::error::CudaError;
use cudarc::driver::sys;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

/// A host-mapped word, freed when dropped (or leaked if the device may still read it).
pub(crate) struct GateWord {
    host: *mut u32,
    device: sys::CUdeviceptr,
}

// SAFETY: the word is plain pinned memory; the host only touches it atomically (`store`).
unsafe impl Send for GateWord {}
// SAFETY: as above.
unsafe impl Sync for GateWord {}

impl GateWord {
    /// A zeroed word in the calling thread's current context.
    pub(crate) fn new() -> Result<GateWord, CudaError> {
        let mut host: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: `host` is a valid out-pointer; 4 bytes of pinned memory are requested.
        let code = unsafe { sys::cuMemHostAlloc(&mut host, size_of::<u32>(), flags) };
        CudaError::check("cuMemHostAlloc", code)?;
        let mut word = GateWord {
            host: host.cast(),
            device: 0,
        };
        word.store(0);
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was returned by cuMemHostAlloc with DEVICEMAP; `device` is writable.
        let code = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) };
        CudaError::check("cuMemHostGetDevicePointer", code)?;
        word.device = device;
        Ok(word)
    }

    /// The word's address as the device sees it.
    pub(crate) fn device(&self) -> sys::CUdeviceptr {
        self.device
    }

    /// Raise the word to `value` (gates up to `value` open).
    pub(crate) fn store(&self, value: u32) {
        // SAFETY: `host` is 4 aligned bytes of live pinned memory owned by `self`; the host side
        // only ever accesses it through this atomic.
        let word = unsafe { AtomicU32::from_ptr(self.host) };
        word.store(value, Ordering::Release);
    }

    /// Give the memory up without freeing it: the device may still wait on it.
    pub(crate) fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for GateWord {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `new` and freed only here.
        let code = unsafe { sys::cuMemFreeHost(self.host.cast()) };
        if let Err(e) = CudaError::check("cuMemFreeHost", code) {
            tracing::warn!("{e}");
        }
    }
}
