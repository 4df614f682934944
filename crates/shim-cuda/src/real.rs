//! The real driver's entry points, found without passing through the shim.
//!
//! The shim exports `dlsym` (see `procaddr.rs`), so every lookup in the process, the shim's own
//! included, reaches it. Real symbols are therefore looked up with the real `dlsym` (found with
//! `dlvsym(RTLD_NEXT, ...)`, which the shim does not replace) in the driver library's own handle,
//! which holds the driver and its dependencies but never the preloaded shim.

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A driver status code, as the C API returns it (kept as a plain integer: the application gets
/// exactly what the driver said).
pub(crate) type Status = u32;

/// `CUDA_ERROR_NOT_FOUND`: what an entry point the driver lacks returns.
pub(crate) const NOT_FOUND: Status = 500;

/// The C signature of `dlsym`.
pub(crate) type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The C library's `dlsym` (the one the shim's export stands in front of). Found on first use
/// without a lock: a lookup made while finding it (by an audit library, a signal handler, an
/// allocator that looks itself up) finds it again instead of waiting on itself; every finder
/// stores the same address.
pub(crate) fn dlsym() -> Option<DlsymFn> {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let mut addr = REAL.load(Ordering::Acquire);
    if addr == 0 {
        // glibc 2.34 moved dlsym into libc (GLIBC_2.34); older ones and other architectures keep
        // the first version.
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"] {
            // SAFETY: both strings are NUL-terminated; RTLD_NEXT searches the objects after
            // the shim, never the shim itself.
            let f = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
            if !f.is_null() {
                addr = f as usize;
                REAL.store(addr, Ordering::Release);
                break;
            }
        }
    }
    // SAFETY: a non-zero `addr` is the address of the C library's `dlsym`, of this signature.
    (addr != 0).then(|| unsafe { std::mem::transmute::<usize, DlsymFn>(addr) })
}

/// The driver library's handle (the one the program loaded, or loaded here).
fn driver() -> *mut c_void {
    static HANDLE: OnceLock<usize> = OnceLock::new();
    *HANDLE.get_or_init(|| {
        for name in [c"libcuda.so.1", c"libcuda.so"] {
            // SAFETY: a NUL-terminated name; loading the driver runs only its initialisers.
            let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if !h.is_null() {
                return h as usize;
            }
        }
        0
    }) as *mut c_void
}

/// The driver's own `name`, or null if it has none (or there is no driver).
pub(crate) fn lookup(name: &CStr) -> *mut c_void {
    let (Some(dlsym), handle) = (dlsym(), driver()) else {
        return std::ptr::null_mut();
    };
    if handle.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a live handle from dlopen and a NUL-terminated name.
    unsafe { dlsym(handle, name.as_ptr()) }
}

/// Declares `$name()` as the lazily found real entry point named like the export `$export`, of
/// type `$ty`.
macro_rules! real_fn {
    ($name:ident, $export:ident, $ty:ty) => {
        /// The real driver's entry point (`None` when the driver lacks it).
        fn $name() -> Option<$ty> {
            static ADDR: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let addr = *ADDR.get_or_init(|| {
                let name = concat!(stringify!($export), "\0");
                std::ffi::CStr::from_bytes_with_nul(name.as_bytes())
                    .map_or(0, |name| $crate::real::lookup(name) as usize)
            });
            // SAFETY: the driver exports this symbol with the C signature `$ty` (CUDA's headers).
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(addr) })
        }
    };
}
pub(crate) use real_fn;
