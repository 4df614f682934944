//! Handing out the shim's entry points where programs look driver functions up at run time.
//!
//! The CUDA runtime does not call driver functions by name: it opens libcuda, looks up
//! `cuGetProcAddress` with `dlsym` on that library's handle (which never finds a preloaded
//! library), and asks it for every other entry point. So the shim exports `dlsym` too
//! (`dlsym.rs`): a lookup of `cuGetProcAddress(_v2)` that the real `dlsym` answers gets the
//! shim's version instead, and that one asks the driver and, when the driver answers with one of
//! the entry points the shim replaces (compared by address, so versions and per-thread variants
//! match exactly), hands out the shim's. Every other lookup is the real `dlsym`'s, unchanged.

#![allow(non_snake_case)]

use crate::exports::*;
use crate::real::{self, real_fn};
use crate::real::{NOT_FOUND, Status};
use std::ffi::{CStr, c_char, c_int, c_void};

/// `(name, the shim's address)` for each listed entry point, the name as a C string.
macro_rules! entries {
    ($($f:ident),* $(,)?) => {
        [$((
            // The name with its NUL: a valid C string by construction.
            CStr::from_bytes_with_nul(concat!(stringify!($f), "\0").as_bytes()),
            $f as *const () as usize,
        )),*]
    };
}

/// The replaced entry points that the driver has: (the driver's address, the shim's).
fn replaced() -> &'static [(usize, usize)] {
    static TABLE: std::sync::OnceLock<Vec<(usize, usize)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        entries![
            cuLaunchKernel,
            cuLaunchKernel_ptsz,
            cuLaunchKernelEx,
            cuLaunchKernelEx_ptsz,
            cuMemcpyHtoDAsync_v2,
            cuMemcpyHtoDAsync_v2_ptsz,
            cuMemcpyDtoHAsync_v2,
            cuMemcpyDtoHAsync_v2_ptsz,
            cuMemcpyDtoDAsync_v2,
            cuMemcpyDtoDAsync_v2_ptsz,
            cuMemcpyAsync,
            cuMemcpyAsync_ptsz,
            cuMemsetD8Async,
            cuMemsetD8Async_ptsz,
            cuStreamSynchronize,
            cuStreamSynchronize_ptsz,
            cuStreamDestroy_v2,
            cuStreamBeginCapture_v2,
            cuStreamBeginCapture_v2_ptsz,
            cuStreamEndCapture,
            cuStreamEndCapture_ptsz,
            cuGraphLaunch,
            cuGraphLaunch_ptsz,
            cuStreamCreate,
            cuStreamCreateWithPriority,
            cuCtxDestroy_v2,
            cuModuleUnload,
            cuLibraryUnload,
            cuEventRecord,
            cuEventRecord_ptsz,
            cuEventRecordWithFlags,
            cuEventRecordWithFlags_ptsz,
            cuStreamWaitEvent,
            cuStreamWaitEvent_ptsz,
            cuEventDestroy_v2,
            cuGetProcAddress,
            cuGetProcAddress_v2,
        ]
        .into_iter()
        .filter_map(|(name, shim)| Some((real::lookup(name.ok()?) as usize, shim)))
        .filter(|&(driver, _)| driver != 0)
        .collect()
    })
}

/// The shim's replacement for the driver's entry point at `driver`, if it has one.
fn replacement(driver: *mut c_void) -> Option<*mut c_void> {
    replaced()
        .iter()
        .find(|&&(d, _)| d == driver as usize)
        .map(|&(_, shim)| shim as *mut c_void)
}

/// Swap the driver's answer in `pfn` for the shim's entry point where it has one.
///
/// # Safety
/// `pfn` is NULL or readable and writable.
unsafe fn substitute(status: Status, pfn: *mut *mut c_void) -> Status {
    if status == 0 && !pfn.is_null() {
        xsched_interpose::guard::quietly("CUDA", "answering cuGetProcAddress", || {
            // SAFETY: non-null, and the driver just wrote an entry point there.
            let driver = unsafe { pfn.read() };
            if let Some(shim) = replacement(driver) {
                // SAFETY: as above.
                unsafe { pfn.write(shim) };
            }
        });
    }
    status
}

/// `cuGetProcAddress` (CUDA 11.3 to 12.x): the driver's answer, with the shim's entry points
/// for those it replaces.
///
/// # Safety
/// As the CUDA driver API requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> Status {
    real_fn!(
        real,
        cuGetProcAddress,
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> Status
    );
    // SAFETY: the caller's arguments, unchanged, to the real entry point.
    let status = real().map_or(NOT_FOUND, |f| unsafe { f(symbol, pfn, version, flags) });
    // SAFETY: `pfn` is as the caller passed it to the driver.
    unsafe { substitute(status, pfn) }
}

/// `cuGetProcAddress_v2` (CUDA 12): as `cuGetProcAddress`.
///
/// # Safety
/// As the CUDA driver API requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status_out: *mut c_int,
) -> Status {
    real_fn!(
        real,
        cuGetProcAddress_v2,
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> Status
    );
    // SAFETY: the caller's arguments, unchanged, to the real entry point.
    let status = real().map_or(NOT_FOUND, |f| unsafe {
        f(symbol, pfn, version, flags, status_out)
    });
    // SAFETY: `pfn` is as the caller passed it to the driver.
    unsafe { substitute(status, pfn) }
}
