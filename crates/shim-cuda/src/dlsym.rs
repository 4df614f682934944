//! The shim's `dlsym`: the C library's, except that a lookup of `cuGetProcAddress(_v2)` gets the
//! shim's (`procaddr.rs` says why the CUDA runtime needs that).
//!
//! The C library's `dlsym` answers relative to its caller: `RTLD_NEXT` searches the objects
//! after the caller's, and `RTLD_DEFAULT` searches the caller's scope, which for a library opened
//! with `RTLD_LOCAL` (every Python extension module) holds its own dependencies. A wrapper that
//! called the real `dlsym` would make the shim the caller of every lookup in the process, and
//! such lookups would find another symbol or none. So on x86-64 the export is a tail jump: it
//! asks [`route`] where the lookup goes and jumps there with the program's return address still
//! on the stack, so the C library's `dlsym` sees the program's caller. Elsewhere it is a plain
//! wrapper, with that difference.

use crate::procaddr::{cuGetProcAddress, cuGetProcAddress_v2};
use crate::real;
use std::ffi::{CStr, c_char, c_void};

/// `dlsym`: jumps to the function `route` picks, with the caller's arguments and return
/// address untouched.
///
/// # Safety
/// As `dlsym(3)` requires of the caller.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // Entry: rdi = handle, rsi = symbol, rsp = 8 mod 16 (the return address). The two pushes and
    // 8 bytes more align the stack for the call; `route` (a C function of the symbol) returns the
    // target in rax; the arguments and the stack are restored, and the jump leaves the caller's
    // return address where the target finds it.
    std::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "mov rdi, rsi",
        "call {route}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        route = sym route,
    )
}

/// `dlsym` where no tail jump is written: the real lookup, made from the shim (so `RTLD_NEXT`
/// and `RTLD_DEFAULT` answer relative to the shim, not the caller).
///
/// # Safety
/// As `dlsym(3)` requires of the caller.
#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let target: unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void =
        // SAFETY: `symbol` is the caller's, as dlsym requires; `route` returns the address of a
        // function of exactly this signature.
        unsafe { std::mem::transmute::<usize, _>(route(symbol)) };
    // SAFETY: the caller's arguments, unchanged.
    unsafe { target(handle, symbol) }
}

/// Where a lookup of `symbol` goes: the shim's substituting lookup for `cuGetProcAddress(_v2)`,
/// else the C library's `dlsym` (or a lookup that finds nothing, if it cannot be found). Never
/// panics: it runs inside the program's `dlsym` call.
///
/// # Safety
/// `symbol` is NULL or a NUL-terminated name, as `dlsym(3)` requires of its caller.
unsafe extern "C" fn route(symbol: *const c_char) -> usize {
    if !symbol.is_null() {
        // SAFETY: a NUL-terminated name by this function's contract.
        let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
        if matches!(name, b"cuGetProcAddress" | b"cuGetProcAddress_v2") {
            return substituting as *const () as usize;
        }
    }
    real::dlsym().map_or(nothing as *const () as usize, |f| f as usize)
}

/// The real lookup of `cuGetProcAddress(_v2)`; where it finds the driver's, the shim's instead.
///
/// # Safety
/// As `dlsym(3)` requires of the caller.
unsafe extern "C" fn substituting(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let Some(real) = real::dlsym() else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, unchanged, to the C library's dlsym.
    let found = unsafe { real(handle, symbol) };
    if found.is_null() || symbol.is_null() {
        return found;
    }
    // SAFETY: `symbol` is a NUL-terminated name by the caller's contract.
    match unsafe { CStr::from_ptr(symbol) }.to_bytes() {
        b"cuGetProcAddress" => cuGetProcAddress as *const () as *mut c_void,
        _ => cuGetProcAddress_v2 as *const () as *mut c_void,
    }
}

/// The lookup when the C library's `dlsym` cannot be found (never on glibc): nothing, said on
/// stderr once.
extern "C" fn nothing(_handle: *mut c_void, _symbol: *const c_char) -> *mut c_void {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("xsched CUDA shim: the C library's dlsym was not found"));
    std::ptr::null_mut()
}
