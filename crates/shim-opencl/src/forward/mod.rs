//! Every OpenCL entry point the shim does not schedule, forwarded unchanged to the real ICD
//! loader, so the shim can stand in for `libOpenCL.so.1` itself: found first on
//! `LD_LIBRARY_PATH` (`xsched run`), opened by path (`OPENCL_PATH`-style settings), or opened by
//! name and searched with `dlsym` through the handle (Python's ctypes, Java bindings). An
//! `LD_PRELOAD`ed shim is reached only through the symbols the program's own references name;
//! a program that `dlopen`s the loader and looks functions up through the handle never sees a
//! preloaded one, and that is why the shim must be the library such programs open.
//!
//! Each forwarder resolves its real function once, by name, in the loader `real.rs` found (never
//! this library, however it was named), and calls it with the caller's arguments; where the
//! loader lacks the function it returns what the API returns for an unavailable operation
//! ([`Unavailable`]). `list.rs` is generated from the loader's exports and the Khronos types
//! (`scripts/opencl/gen-forwarders.py`), with the test that holds every forwarder to its Khronos
//! type.

#![allow(non_snake_case)]

pub(crate) mod real;

use opencl_sys::{CL_INVALID_OPERATION, cl_int};

/// What a forwarder returns when the real loader lacks its function.
pub(crate) trait Unavailable {
    /// The value.
    fn unavailable() -> Self;
}

impl Unavailable for cl_int {
    /// Status codes: the operation is not available.
    fn unavailable() -> Self {
        CL_INVALID_OPERATION
    }
}

impl<T> Unavailable for *mut T {
    /// Objects and addresses: none (the caller's `errcode_ret`, where it has one, is untouched).
    fn unavailable() -> Self {
        std::ptr::null_mut()
    }
}

impl Unavailable for () {
    fn unavailable() -> Self {}
}

/// Defines one exported forwarder per entry: `fn clName(arg: Type, ...) -> Ret;`.
macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {$(
        /// Forwarded unchanged to the real ICD loader.
        ///
        /// # Safety
        /// As the OpenCL specification requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            type Real = unsafe extern "C" fn($($ty),*) $(-> $ret)?;
            static SLOT: std::sync::OnceLock<Option<Real>> = std::sync::OnceLock::new();
            let real = SLOT.get_or_init(|| {
                real::symbol(concat!(stringify!($name), "\0")).map(|address| {
                    // SAFETY: the loader's function of this name has this Khronos type (the
                    // test `every_forwarder_has_the_khronos_type` holds `Real` to it), and a
                    // data pointer and a function pointer have one size and form on every
                    // platform `dlsym` serves.
                    unsafe { std::mem::transmute::<*mut std::ffi::c_void, Real>(address) }
                })
            });
            match real {
                // SAFETY: the caller's arguments, unchanged, under the caller's contract.
                Some(real) => unsafe { real($($arg),*) },
                None => Unavailable::unavailable(),
            }
        }
    )*};
}

/// The real loader's function `$name` as its Khronos function type `$ty` (an `Option` of the
/// function pointer: `None` where the loader lacks it), looked up once.
macro_rules! real_fn {
    ($name:ident, $ty:ty) => {{
        static SLOT: std::sync::OnceLock<$ty> = std::sync::OnceLock::new();
        *SLOT.get_or_init(|| {
            let address = $crate::forward::real::symbol(concat!(stringify!($name), "\0"))
                .unwrap_or(std::ptr::null_mut());
            // SAFETY: the loader's function of this name has the Khronos type `$ty`; a null
            // address becomes `None` (an `Option` of a function pointer is a nullable pointer).
            unsafe { std::mem::transmute::<*mut std::ffi::c_void, $ty>(address) }
        })
    }};
}
pub(crate) use real_fn;

mod list;
